"""Where Florence-2's image tokens sit: a pooled token, then the last DaViT grid's cells.

A lit pixel must land on the token whose box holds it: the tower's output (before the
projector) changes, between a black image and the same image with one white pixel, most
at the cell the geometry's box says holds that pixel (the convolutions' receptive fields
spill over to neighbours, so the largest change, not the only one, is the test)."""

import math

import pytest

from vlreg.testing.conformance import lit

CHECKPOINT = "florence2"


def test_grids_count_the_image_tokens(model):
    image = lit(40, 30, 3, 3)
    (geometry,) = model.vision.geometry("<CAPTION>", [image])
    pooled, cells = geometry.grids
    assert pooled.tokens == 1 and not pooled.covered.any()
    assert (cells.rows, cells.columns) == (4, 4) and cells.covered.all()
    with model.trace("<CAPTION>", images=[image]):
        mask = model.vision.image_token_mask.save()
    assert int(mask.sum()) == pooled.tokens + cells.tokens
    assert cells.boxes[-1].tolist() == [30.0, 22.5, 40.0, 30.0]


@pytest.mark.parametrize("x, y", [(3, 3), (35, 5), (12, 25), (38, 28)])
def test_a_lit_pixel_lands_on_the_token_whose_box_holds_it(model, x, y):
    width, height = 40, 30
    (geometry,) = model.vision.geometry("<CAPTION>", [lit(width, height, x, y)])
    cells = geometry.grids[1]
    boxes = cells.boxes
    holding = [i for i, (x0, y0, x1, y1) in enumerate(boxes.tolist()) if x0 <= x + 0.5 < x1 and y0 <= y + 0.5 < y1]
    assert len(holding) == 1
    outputs = []
    for image in (_black(width, height), lit(width, height, x, y)):
        with model.trace("<CAPTION>", images=[image]):
            outputs.append(model.vision.tower_output.save())
    change = (outputs[1] - outputs[0]).abs().sum(-1)[0]
    assert change.shape[0] == cells.tokens
    assert int(change.argmax()) == holding[0]
    assert not math.isnan(float(boxes[holding[0], 0]))


def _black(width, height):
    from PIL import Image

    return Image.new("RGB", (width, height), "black")
