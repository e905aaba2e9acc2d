"""GIT's declared grids against its image processor (a 28-pixel centre crop after the
shorter side is resized to 28, 14-pixel patches on the tiny tower):

* each image's tokens are a class token (NaN: no pixels of its own) and 2 x 2 patches, at
  the first positions of the blocks' stream, before the prompt's;
* a probe lit at the centre of a patch token's box is brightest inside that patch of what
  the tower sees;
* the patches' boxes tile the centre square the crop keeps.
"""

from __future__ import annotations

import math

import torch
from PIL import Image

from vlreg.testing.conformance import lit

PATCH = 14
#: Wide, tall, square, odd, smaller than the crop, a narrow strip.
SIZES = ((112, 84), (84, 112), (64, 64), (45, 46), (10, 12), (57, 130))
PROMPT = "What is in this image?"
CHECKPOINTS = ("git",)
LOAD_OPTIONS = {"dispatch": False}


def seen(model, picture) -> torch.Tensor:
    """What the tower sees of ``picture``: the processor's pixels, channels first."""
    return model.processor(text=PROMPT, images=[picture], return_tensors="pt")["pixel_values"][0]


def test_the_image_tokens_are_a_class_token_then_the_patches_before_the_prompt(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(PROMPT, [Image.new("RGB", size)])
        token, patches = geometry.grids
        assert (token.tokens, patches.rows, patches.columns) == (1, 2, 2), size
        assert torch.equal(geometry.positions, torch.arange(5)) and geometry.row == 0
        assert math.isnan(float(token.boxes[0, 0])) and not patches.boxes.isnan().any()


def test_a_lit_pixel_lands_in_the_patch_whose_box_holds_it(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(PROMPT, [Image.new("RGB", size)])
        patches = geometry.grids[1]
        dark = seen(model, Image.new("RGB", size))[0]
        for index in range(patches.tokens):
            row, column = divmod(index, patches.columns)
            x0, y0, x1, y1 = patches.boxes[index].tolist()
            light = (seen(model, lit(*size, (x0 + x1) / 2, (y0 + y1) / 2))[0] - dark).abs()
            brightest = divmod(int(light.argmax()), light.shape[-1])
            assert (brightest[0] // PATCH, brightest[1] // PATCH) == (row, column), (size, index)


def test_the_patches_tile_the_centre_square_the_crop_keeps(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(PROMPT, [Image.new("RGB", size)])
        boxes = geometry.grids[1].boxes
        area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
        low, high = boxes[:, :2].min(0).values, boxes[:, 2:].max(0).values
        assert torch.isclose(area, (high - low).prod()), size  # the boxes tile one rectangle
        short = min(range(2), key=lambda axis: size[axis])
        assert low[short] == 0 and torch.isclose(high[short], torch.tensor(float(size[short]), dtype=high.dtype)), size
        assert torch.isclose(low[1 - short] + high[1 - short], torch.tensor(float(size[1 - short]), dtype=high.dtype),
                             atol=size[1 - short] / 14), size  # centred, up to the resize's truncation
