"""Mllama's geometry: the states' positions of each image mapped to tiles and patches,
checked against the pixels the processor hands the tower."""

from __future__ import annotations

import math

import pytest
import torch
from PIL import Image

from vlreg_mllama.geometry import arrangements

CHECKPOINT = "mllama"

#: (width, height) -> the (rows, columns) of 28-pixel tiles the processor cuts it into
#: (at most 4), worked out by hand from its rule: the arrangement that upscales least,
#: else downscales least, the smaller canvas on a tie.
SPLITS = {(112, 84): (2, 2), (28, 28): (1, 1), (20, 20): (1, 1), (200, 50): (1, 4), (30, 100): (4, 1), (56, 30): (2, 2)}


def quadrants(width: int, height: int) -> Image.Image:
    """Red where x < width / 2, green where y < height / 2 (both, or neither)."""
    x = torch.arange(width)[None, :].expand(height, width)
    y = torch.arange(height)[:, None].expand(height, width)
    pixels = torch.stack([(x < width / 2) * 255, (y < height / 2) * 255, torch.full_like(x, 128)], -1)
    return Image.fromarray(pixels.to(torch.uint8).numpy())


def prompt(model, images: int = 1) -> str:
    content = [{"type": "image"}] * images + [{"type": "text", "text": "What is in this image?"}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)


@pytest.mark.parametrize("size", SPLITS)
def test_tiles_and_patches_lie_where_the_processor_put_the_pixels(model, size):
    width, height = size
    picture = quadrants(width, height)
    (geometry,) = model.vision.geometry(prompt(model), [picture])
    encoding = model.processor(text=prompt(model), images=[picture], return_tensors="pt")
    rows, columns = SPLITS[size]
    assert arrangements(4)[int(encoding["aspect_ratio_ids"][0, 0]) - 1] == (rows, columns)
    assert geometry.tokens == 4 * 5 and geometry.offset == 0 and geometry.row == 0
    tiles = [grid for grid in geometry.grids if grid.label.startswith("tile") and not grid.label.endswith("token")]
    assert [grid.label for grid in tiles] == [f"tile {r},{c}" for r in range(rows) for c in range(columns)]
    assert all(grid.boxes.isnan().all() for grid in geometry.grids if grid.label.endswith(("class token",)) or grid.label.startswith("padding"))
    mean = torch.tensor(model.processor.image_processor.image_mean)[:, None, None]
    std = torch.tensor(model.processor.image_processor.image_std)[:, None, None]
    pixels = encoding["pixel_values"][0, 0] * std + mean  # [tiles, 3, 28, 28], back to 0..1
    padding = (pixels.abs() < 1e-4).all(1)  # the processor pads with zeros
    covered_boxes = []
    for index, grid in enumerate(tiles):
        for token in range(grid.tokens):
            i, j = divmod(token, grid.columns)
            patch, empty = pixels[index, :, i * 14:(i + 1) * 14, j * 14:(j + 1) * 14], padding[index, i * 14:(i + 1) * 14, j * 14:(j + 1) * 14]
            box = grid.boxes[token]
            assert bool(box.isnan().any()) == bool(empty.all()), (size, index, token)
            if box.isnan().any():
                continue
            covered_boxes.append(box)
            seen = patch[:, ~empty].mean(-1)  # the patch's image pixels: red and green say where they came from
            x0, y0, x1, y1 = box.tolist()
            if x1 <= width / 2 - 2 or x0 >= width / 2 + 2:
                assert (seen[0] > 0.5) == (x1 <= width / 2), (size, box)
            if y1 <= height / 2 - 2 or y0 >= height / 2 + 2:
                assert (seen[1] > 0.5) == (y1 <= height / 2), (size, box)
    boxes = torch.stack(covered_boxes)
    assert boxes[:, 0].min() == 0 and boxes[:, 1].min() == 0
    assert math.isclose(boxes[:, 2].max(), width) and math.isclose(boxes[:, 3].max(), height)


def test_two_images_share_their_rows_states(model):
    """Each image of a prompt has its run of the states' positions, in order; the keys of
    a cross-attention block run over all of them."""
    pictures = [quadrants(112, 84), quadrants(28, 28)]
    first, second = model.vision.geometry(prompt(model, 2), pictures)
    assert (first.row, second.row) == (0, 0) and (first.offset, second.offset) == (0, 20)
    assert second.positions.tolist() == list(range(20, 40))
    assert [grid.label for grid in second.grids][2:] == ["padding tile 1", "padding tile 2", "padding tile 3"]
    with model.trace(prompt(model, 2), images=pictures):
        features = model.vision.image_features.save()
        keys = model.layers[1].cross_attn.attention_keys.save()
    assert features.shape[1] == keys.shape[2] == 40
    assert features[first.row, second.features].shape == (20, model.hidden_size)
