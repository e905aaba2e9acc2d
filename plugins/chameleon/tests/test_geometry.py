"""The declared grids against each family's image processor: one code a cell of the
processed image, 8 x 8 pixels on the tiny VQ encoders.

* a probe lit at the centre of a code token's box is brightest inside that token's cell of
  the image the encoder sees (Emu3's resize to multiples of the cell; Chameleon's resize
  and centre crop);
* Emu3's end-of-line tokens, and only they, have NaN boxes, and the code tokens' boxes tile
  the image; Chameleon's tile the centre square its crop keeps;
* the tokens the grids count are the placeholders the processor writes.
"""

from __future__ import annotations

import torch
from PIL import Image

from vlreg.testing.conformance import lit


CELL = 8
#: Wide, tall, square, odd, below Emu3's minimum pixels, above its maximum, a narrow strip.
SIZES = ((112, 84), (84, 112), (64, 64), (45, 46), (10, 12), (300, 200), (57, 130))
PROMPTS = {"emu3": None, "chameleon": "Where is it?<image>"}
CHECKPOINTS = tuple(sorted(PROMPTS))
LOAD_OPTIONS = {"dispatch": False}


def prompt(model) -> str:
    written = PROMPTS[model.family.parts["wrapper"].model_type]
    return written or model.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]}],
        add_generation_prompt=True, tokenize=False)


def seen(model, picture) -> torch.Tensor:
    """What the encoder sees of ``picture``: the processor's pixels, channels first."""
    return model.processor(text=prompt(model), images=[picture], return_tensors="pt")["pixel_values"][0]


def grid_of(model, size):
    (geometry,) = model.vision.geometry(prompt(model), [Image.new("RGB", size)])
    (grid,) = geometry.grids
    return geometry, grid


def codes_of(model, grid) -> tuple[int, torch.Tensor]:
    """The columns of codes a row holds, and which tokens are codes (not Emu3's line ends)."""
    line_ends = model.family.parts["wrapper"].model_type == "emu3"
    columns = grid.columns - 1 if line_ends else grid.columns
    return columns, torch.arange(grid.tokens) % grid.columns < columns


def test_a_lit_pixel_lands_in_the_cell_of_the_token_whose_box_holds_it(model):
    for size in SIZES:
        _, grid = grid_of(model, size)
        dark = seen(model, Image.new("RGB", size))[0]
        columns, codes = codes_of(model, grid)
        assert grid.fold == 1 and (grid.rows * CELL, columns * CELL) == tuple(dark.shape), size
        for token in codes.nonzero().flatten().tolist():
            row, column = divmod(token, grid.columns)
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            light = (seen(model, lit(*size, (x0 + x1) / 2, (y0 + y1) / 2))[0] - dark).abs()
            brightest = divmod(int(light.argmax()), light.shape[-1])
            assert (brightest[0] // CELL, brightest[1] // CELL) == (row, column), (size, token)


def test_the_codes_boxes_tile_what_the_encoder_sees_and_only_line_ends_are_nan(model):
    for size in SIZES:
        _, grid = grid_of(model, size)
        _, codes = codes_of(model, grid)
        assert torch.equal(grid.covered, codes), size
        boxes = grid.boxes[codes]
        area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
        low, high = boxes[:, :2].min(0).values, boxes[:, 2:].max(0).values
        assert torch.isclose(area, (high - low).prod()), size  # the boxes tile one rectangle
        assert (low >= 0).all() and (high <= torch.tensor(size, dtype=high.dtype) + 1e-9).all(), size
        if model.family.parts["wrapper"].model_type == "emu3":  # resized whole: the rectangle is the image
            assert low.tolist() == [0, 0] and torch.allclose(high, torch.tensor(size, dtype=high.dtype)), size
        else:  # the centre crop: a band of the longer side, all of the shorter one
            short = min(range(2), key=lambda axis: size[axis])
            assert low[short] == 0 and torch.isclose(high[short], torch.tensor(float(size[short]), dtype=high.dtype))
            assert torch.isclose(low[1 - short] + high[1 - short], torch.tensor(float(size[1 - short]), dtype=high.dtype),
                                 atol=size[1 - short] / 32), size  # centred, up to the resize's truncation


def test_the_grid_counts_the_placeholders_the_processor_writes(model):
    for size in SIZES:
        picture = Image.new("RGB", size)
        geometry, grid = grid_of(model, size)
        ids = model.processor(text=prompt(model), images=[picture], return_tensors="pt")["input_ids"][0]
        placeholders = (ids == model._module.config.image_token_id).nonzero().flatten()
        assert torch.equal(geometry.positions, placeholders) and geometry.tokens == grid.rows * grid.columns, size
