"""The Qwen3 line's declared grids (the ``"qwen_vit"`` adapter's) against its processor and
model, on Qwen3-VL and on Cosmos3 Omni, whose checkpoint carries a Qwen3VLProcessor:

* an image is one grid of ``grid_h / 2`` x ``grid_w / 2`` tokens (``image_grid_thw``),
  each a 2 x 2 merge block of 16-pixel patches, its box that block's pixels scaled back
  onto the original image, the boxes tiling it;
* a probe filling a token's box is brightest in that token's merge block of the
  processor's patches;
* a token is its merge block: editing those four patches at the last tower block moves
  that token's features and no other's.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vlreg.testing import chat
from vlreg.testing.conformance import image, moved_features

CHECKPOINTS = ("qwen3_vl", "cosmos3_omni")

SIZES = ((112, 84), (64, 128), (150, 60), (64, 64))


def probe(size, box) -> Image.Image:
    """Black, white on every pixel whose centre lies in ``box``."""
    width, height = size
    xs, ys = torch.arange(width) + 0.5, torch.arange(height) + 0.5
    inside = ((xs >= box[0]) & (xs < box[2]))[None, :] & ((ys >= box[1]) & (ys < box[3]))[:, None]
    return Image.fromarray((inside[..., None].expand(-1, -1, 3).to(torch.uint8) * 255).numpy())


def test_an_image_is_one_grid_of_merge_blocks_tiling_it(model):
    for size in SIZES:
        encoding = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")
        _, h, w = encoding["image_grid_thw"][0].tolist()
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, grid.fold) == (h // 2, w // 2, 1), size
        assert geometry.tokens == int((encoding["input_ids"] == model._module.config.image_token_id).sum())
        area = ((grid.boxes[:, 2] - grid.boxes[:, 0]) * (grid.boxes[:, 3] - grid.boxes[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64)), size
        scale = torch.tensor([w * 16 / size[0], h * 16 / size[1]] * 2, dtype=torch.float64)
        rows, columns = torch.meshgrid(torch.arange(h // 2), torch.arange(w // 2), indexing="ij")
        expected = torch.stack([columns, rows, columns + 1, rows + 1], -1).reshape(-1, 4) * 32
        torch.testing.assert_close(grid.boxes * scale, expected.double())


def test_a_probe_over_a_tokens_box_lights_that_tokens_merge_block(model):
    merge = model.vision.spatial_merge_size ** 2
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        for token in sorted({0, grid.tokens // 3, grid.tokens // 2, grid.tokens - 1}):
            lit = probe(size, grid.boxes[token].tolist())
            pixels = model.processor.image_processor(images=[lit], return_tensors="pt")["pixel_values"]
            assert int(pixels.reshape(-1, merge, pixels.shape[-1]).mean((1, 2)).argmax()) == token, (size, token)


@pytest.mark.parametrize("token", [0, 5, 11])
def test_a_token_is_its_merge_block_of_patches(model, token):
    pictures, prompt = [image(112, 84)], chat(model)
    (geometry,) = model.vision.geometry(prompt, pictures)
    merge = model.vision.spatial_merge_size ** 2
    moved = moved_features(model, prompt, pictures, 0, slice(token * merge, (token + 1) * merge))  # one packed row
    assert geometry.tokens == 12 and moved == [token]
