"""Where GOT-OCR 2.0's and PP-Chart2Table's image tokens sit: 4 x 4 a crop on the tiny
checkpoints, each centred where the projector's strided convolutions sample the tower's grid.

* the grids count the image tokens at the mask's positions, and their boxes tile each crop;
* a pixel lit at a token's centre lands on the token whose box holds it: the features
  change most there (the global block spreads a little of every patch everywhere, and the
  convolutions overlap, so the largest change, not the only one, is the test);
* a token reads exactly its receptive field of the tower's output: an edit of one patch
  moves the features of the tokens `receptive_field` names and no others;
* with ``crop_to_patches`` (GOT's image processor) an image is its tiles, then the
  thumbnail, each a grid.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vlreg.testing import chat
from vlreg.testing.conformance import image, lit
from vlreg_got_ocr2.checkpoints import PATCH_SIZE, SIDE
from vlreg_got_ocr2.geometry import receptive_field

PATCHES, SIDE_TOKENS = SIDE // PATCH_SIZE, 4
SIZES = ((32, 32), (80, 60), (45, 150))


CHECKPOINTS = ("got_ocr2", "pp_chart2table")


def features(model, picture, **options) -> torch.Tensor:
    with model.trace(chat(model, text="OCR: "), images=[picture], **options):
        found = model.vision.image_features.save()
    return found


@pytest.mark.parametrize("size", SIZES)
def test_grids_count_the_image_tokens_and_tile_the_image(model, size):
    (geometry,) = model.vision.geometry(chat(model, text="OCR: "), [image(*size)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, grid.fold) == (SIDE_TOKENS, SIDE_TOKENS, 4) and grid.covered.all()
    with model.trace(chat(model, text="OCR: "), images=[image(*size)]):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    boxes = grid.boxes
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
    assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64))
    scale = size[0] / SIDE  # token 0 from the edge to patch 2.5; the last from patch 10.5 to the edge
    assert boxes[0].tolist()[0::2] == pytest.approx([0.0, 2.5 * PATCH_SIZE * scale])
    assert boxes[SIDE_TOKENS - 1].tolist()[0::2] == pytest.approx([10.5 * PATCH_SIZE * scale, size[0]])


@pytest.mark.parametrize("size", SIZES[1:])
def test_a_lit_pixel_lands_on_the_token_whose_box_holds_it(model, size):
    width, height = size
    clean = features(model, Image.new("RGB", size, "black"))
    (geometry,) = model.vision.geometry(chat(model, text="OCR: "), [Image.new("RGB", size, "black")])
    for token in (0, 3, 5, 10, 12, 15):
        row, column = divmod(token, SIDE_TOKENS)
        x, y = (4 * column + 0.5) * PATCH_SIZE * width / SIDE, (4 * row + 0.5) * PATCH_SIZE * height / SIDE
        assert geometry.token_at(x, y) == token, (size, token)
        change = (features(model, lit(width, height, x, y)) - clean).abs().sum(-1)
        assert int(change.argmax()) == token, (size, token)


@pytest.mark.parametrize("patch", [(0, 0), (5, 7), (6, 15), (8, 3), (15, 1)])
def test_a_token_reads_exactly_its_receptive_field(model, patch):
    row, column = patch
    with model.trace(chat(model, text="OCR: "), images=[image(80, 60)]):
        clean = model.vision.image_features.save()
    with model.trace(chat(model, text="OCR: "), images=[image(80, 60)]):
        model.vision.tower_output[0, row * PATCHES + column] += 1
        edited = model.vision.image_features.save()
    moved = set((edited != clean).any(-1).nonzero().flatten().tolist())
    expected = {r * SIDE_TOKENS + c for r in range(SIDE_TOKENS) for c in range(SIDE_TOKENS)
                if row in receptive_field(r, PATCHES) and column in receptive_field(c, PATCHES)}
    assert moved == expected and expected


@pytest.mark.parametrize("model", ["got_ocr2"], indirect=True)  # PP-Chart2Table's image processor does not tile
def test_tiles_then_the_thumbnail(model):
    picture, options = image(64, 32), {"crop_to_patches": True, "max_patches": 4}
    (geometry,) = model.vision.geometry(chat(model, text="OCR: "), [picture], **options)
    assert [grid.label for grid in geometry.grids] == ["tile 0,0", "tile 0,1", "thumbnail"]
    crops = model.processor(text=chat(model, text="OCR: "), images=[picture], return_tensors="pt", **options)["pixel_values"]
    assert crops.shape[0] == 3 and geometry.tokens == 3 * SIDE_TOKENS**2
    with model.trace(chat(model, text="OCR: "), images=[picture], **options):
        projected = model.projector.output.save()
        found = model.vision.image_features.save()
    for index in range(3):
        assert torch.equal(found[geometry.span(index)], projected[index])
    tiles = torch.cat([grid.boxes for grid in geometry.grids[:2]])
    area = ((tiles[:, 2] - tiles[:, 0]) * (tiles[:, 3] - tiles[:, 1])).sum()
    assert torch.isclose(area, torch.tensor(64.0 * 32, dtype=torch.float64))
    assert geometry.token_at(33, 1, 1) == 0  # the second tile's first token starts at its left edge
