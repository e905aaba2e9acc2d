"""Janus's and DeepSeek-VL's declared grid against their image processors (DeepSeek-VL's
resizes and pads as Janus's does): the image resized to a longer side of 56 pixels and
padded, centred, to a square.

* a probe lit at the centre of a token's box is brightest inside that token's 7 x 7 cell
  of the square the tower sees;
* a token's box is NaN exactly where its cell is all padding, and the covered boxes tile
  the image exactly.
"""

from __future__ import annotations

import torch
from PIL import Image

from vlreg.testing import chat
from vlreg.testing.conformance import lit
from vlreg_janus.checkpoints import PATCH

CHECKPOINTS = ("janus", "deepseek_vl")
LOAD_OPTIONS = {"dispatch": False}

#: Square, wide, tall, odd, smaller than the square, thinner than the processor's minimum.
SIZES = ((56, 56), (112, 84), (84, 112), (30, 200), (200, 30), (45, 46), (17, 9), (300, 3), (57, 56))


def square(model, picture) -> torch.Tensor:
    return model.processor(text=chat(model, text=None), images=[picture], return_tensors="pt")["pixel_values"][0]


def test_a_lit_pixel_lands_in_the_cell_of_the_token_whose_box_holds_it(model):
    prompt = chat(model, text=None)
    for size in SIZES:
        (geometry,) = model.vision.geometry(prompt, [Image.new("RGB", size)])
        (grid,) = geometry.grids
        dark = square(model, Image.new("RGB", size))[0]  # the probe's image without it: padding is brighter than black
        assert (grid.rows, grid.columns, grid.fold) == (8, 8, 1)
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            if not grid.covered[token] or min(x1 - x0, y1 - y0) < 2:
                continue  # no pixel of the image, or less than a pixel's probe can single out
            seen = square(model, lit(*size, (x0 + x1) / 2, (y0 + y1) / 2))[0] - dark
            row, column = divmod(int(seen.argmax()), seen.shape[-1])
            assert (row // PATCH, column // PATCH) == divmod(token, grid.columns), (size, token)


def test_a_box_is_nan_exactly_over_the_padding_and_the_boxes_tile_the_image(model):
    prompt = chat(model, text=None)
    for size in SIZES:
        (geometry,) = model.vision.geometry(prompt, [Image.new("RGB", size, "white")])
        (grid,) = geometry.grids
        pixels = square(model, Image.new("RGB", size, "white"))[0]  # white is far above the padding's mean colour
        cells = pixels.reshape(8, PATCH, 8, PATCH).amax((1, 3)).flatten()
        assert torch.equal(grid.covered, cells > 1), size
        boxes = grid.boxes[grid.covered]
        area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64)), size
        assert boxes[:, :2].min() == 0 and torch.allclose(boxes[:, 2:].max(0).values, torch.tensor(size, dtype=torch.float64))
