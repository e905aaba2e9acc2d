"""InternVL's declared grids against the image processor's own tiling, on 60 image sizes.

Each image is a ramp: a pixel's red value is its column and its green value its row.
The processor's resizes reproduce a ramp (up to rounding and the clamping at the image's
edges), so the mean red and green over the pixels a token's patches hold, once the
normalisation is undone, is the centre of what the token sees in the original image:
it must be the centre of the token's declared box. Crops are matched to grids in order.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image


CHECKPOINT = "internvl"
LOAD_OPTIONS = {"dispatch": False}

#: 60 sizes up to 255 pixels a side (a ramp's value is a pixel index), whose aspects
#: select every arrangement of 1 to 4 tiles.
SIZES = [(w, h) for w in (17, 40, 56, 63, 90, 112, 150, 201, 224, 255) for h in (21, 48, 84, 130, 199, 250)]
ARRANGEMENTS = {(1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (1, 4), (4, 1), (2, 2)}


def ramp(width: int, height: int) -> Image.Image:
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    return Image.fromarray(np.stack([x, y, np.full_like(x, 128)], -1).astype(np.uint8))


def centres(model, picture: Image.Image) -> torch.Tensor:
    """``[crops, tokens, 2]``: the mean (column, row) of the original pixels behind each
    token of each crop, as the processor hands the crops to the tower."""
    processor = model.processor
    prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}]}], tokenize=False)
    pixels = processor(text=prompt, images=[picture], return_tensors="pt")["pixel_values"].double()
    vision = processor.image_processor
    mean = torch.tensor(vision.image_mean, dtype=torch.float64)[:, None, None]
    std = torch.tensor(vision.image_std, dtype=torch.float64)[:, None, None]
    values = (pixels * std + mean) * 255  # [crops, 3, side, side], red = column, green = row
    crops, _, side, _ = values.shape
    cell = 2 * model.vision.patch_size  # a token is 2 x 2 patches
    cells = values[:, :2].reshape(crops, 2, side // cell, cell, side // cell, cell).mean((3, 5))
    return cells.permute(0, 2, 3, 1).reshape(crops, -1, 2) + 0.5  # pixel centres


def test_boxes_are_the_processors_tiles_and_thumbnail(model):
    seen = set()
    for width, height in SIZES:
        picture = ramp(width, height)
        (geometry,) = model.vision.geometry("<IMG_CONTEXT>", [picture])
        found = centres(model, picture)
        assert len(geometry.grids) == found.shape[0], (width, height)
        tiles = [grid for grid in geometry.grids if grid.label.startswith("tile")]
        columns = 1 + max(int(grid.label.split(",")[1]) for grid in tiles)
        seen.add((columns, len(tiles) // columns))
        assert (geometry.grids[-1].label == "thumbnail") == (len(tiles) > 1)
        for grid, crop in zip(geometry.grids, found):
            assert grid.fold == 2 and grid.covered.all()
            boxes = grid.boxes
            centre = (boxes[:, :2] + boxes[:, 2:]) / 2
            size = boxes[:, 2:] - boxes[:, :2]
            error = (crop - centre).abs()
            assert (error <= 0.05 * size + 0.25).all(), (width, height, grid.label, float((error / size).max()))
        whole = torch.cat([g.boxes for g in tiles])
        area = ((whole[:, 2] - whole[:, 0]) * (whole[:, 3] - whole[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(width * height), dtype=torch.float64))
        assert whole[:, :2].min() == 0 and torch.allclose(whole[:, 2:].max(0).values, torch.tensor([width, height], dtype=torch.float64))
    assert seen == ARRANGEMENTS


def test_tiles_do_not_overlap(model):
    (geometry,) = model.vision.geometry("<IMG_CONTEXT>", [ramp(150, 84)])
    boxes = torch.cat([g.boxes for g in geometry.grids[:-1]])
    x = (torch.minimum(boxes[:, None, 2], boxes[None, :, 2]) - torch.maximum(boxes[:, None, 0], boxes[None, :, 0])).clamp(min=0)
    y = (torch.minimum(boxes[:, None, 3], boxes[None, :, 3]) - torch.maximum(boxes[:, None, 1], boxes[None, :, 1])).clamp(min=0)
    assert (x * y).fill_diagonal_(0).max() < 1e-9
