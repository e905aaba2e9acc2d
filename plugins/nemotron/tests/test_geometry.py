"""NemotronH Omni's declared grids against the processor's resize and the wrapper's own
pixel shuffle, on 36 image sizes (images shrunk to the patch budget and grown to its floor).

Each image is a ramp: a pixel's red value is its column and its green value its row. The
processor's resize reproduces a ramp (up to rounding and the edges), so the mean red and
green over the pixels of the patches a token is made of, once the normalisation is undone,
is the centre of what the token sees in the original image: it must be the centre of the
token's declared box. Which patches make a token is asked of the model itself: its
``pixel_shuffle`` run on each patch's index.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image


CHECKPOINT = "nemotron_h_omni"

SIZES = [(w, h) for w in (17, 40, 90, 150, 201, 255) for h in (21, 48, 84, 130, 199, 250)]


def ramp(width: int, height: int) -> Image.Image:
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    return Image.fromarray(np.stack([x, y, np.full_like(x, 128)], -1).astype(np.uint8))


def token_centres(model, picture: Image.Image) -> tuple[torch.Tensor, tuple[int, int]]:
    """``[tokens, 2]``: the mean (column, row) of the original pixels behind each token, in
    the order the wrapper hands the tokens to the text model, and the image's patch grid."""
    encoding = model.processor(text="<image>", images=[picture], return_tensors="pt")
    (rows, columns), = encoding["image_grid_hw"].tolist()
    processor, patch = model.processor.image_processor, model.vision.patch_size
    mean = torch.tensor(processor.image_mean, dtype=torch.float64)[:, None, None]
    std = torch.tensor(processor.image_std, dtype=torch.float64)[:, None, None]
    pixels = encoding["pixel_values"].double().view(-1, 3, patch, patch) * std + mean  # [patches, 3, p, p]
    per_patch = pixels[:, :2].mean((2, 3)) * 255 + 0.5  # red = column, green = row, at pixel centres
    index = torch.arange(rows * columns, dtype=torch.float32).view(1, rows, columns, 1)
    wrapper = model._module
    folded = wrapper.pixel_shuffle(index, scale_factor=wrapper.config.downsample_ratio).flatten(0, 2).long()
    return per_patch[folded].mean(1), (rows, columns)  # [tokens, fold * fold patches] -> their mean


def test_boxes_are_the_processors_resize_folded_by_the_pixel_shuffle(model):
    grids_seen = set()
    for width, height in SIZES:
        picture = ramp(width, height)
        (geometry,) = model.vision.geometry("<image>", [picture])
        (grid,) = geometry.grids
        found, (rows, columns) = token_centres(model, picture)
        grids_seen.add((rows, columns))
        assert grid.fold == 2 and (grid.rows, grid.columns) == (rows // 2, columns // 2) and grid.covered.all()
        assert len(geometry.positions) == grid.tokens == found.shape[0]
        boxes = grid.boxes
        centre, size = (boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2]
        error = (found - centre).abs()
        assert (error <= 0.01 * size).all(), (width, height, float((error / size).max()))
        area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(width * height), dtype=torch.float64))
    assert len(grids_seen) > 5 and min(r * c for r, c in grids_seen) >= 16 and max(r * c for r, c in grids_seen) <= 64


def test_a_prompt_with_two_images_has_a_grid_each_in_order(model):
    pictures = [ramp(150, 84), ramp(40, 199)]
    prompt = "<image> and <image>"
    first, second = model.vision.geometry(prompt, pictures)
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    mask = encoding["input_ids"][0] == model._module.config.image_token_id
    assert first.positions.max() < second.positions.min()
    assert torch.equal(torch.cat([first.positions, second.positions]), mask.nonzero()[:, 0])
    assert (first.grids[0].columns > first.grids[0].rows) and (second.grids[0].rows > second.grids[0].columns)
