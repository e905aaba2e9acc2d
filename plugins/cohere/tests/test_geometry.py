"""Aya Vision's and Command A Vision's declared grids against their processors and models.

* an image's grids are the crops its image processor cuts, in order: the tiles, then
  the thumbnail where there are several, each of 4 x 4 tokens of 2 x 2 patches;
* each token's box is over the pixels the processor puts in that token's cell: a probe
  lit at the box's centre is brightest inside that token's cell of its crop, and a tile's
  boxes tile the image exactly;
* each token is its 2 x 2 block of its crop's patches: changing those patches changes
  that token's features and no other's.
"""

from __future__ import annotations

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import centres, image, lit, moved_features, patch_block
from vlreg_cohere.checkpoints import TILE


#: (width, height) -> the tiles' (columns, rows) each processor picks (1 x 1: no thumbnail).
SIZES = {
    "aya_vision": {(56, 56): (1, 1), (112, 56): (2, 1), (56, 112): (1, 2), (168, 60): (3, 1), (40, 150): (1, 4),
                   (112, 84): (2, 2), (201, 48): (4, 1), (17, 21): (1, 1)},
    "cohere2_vision": {(56, 56): (1, 1), (112, 56): (2, 1), (56, 112): (1, 2), (168, 60): (3, 1), (40, 150): (1, 3),
                       (112, 84): (2, 2), (201, 48): (4, 1), (17, 21): (1, 1)},
}
CHECKPOINTS = tuple(sorted(SIZES))


def crops(model, picture) -> torch.Tensor:
    return model.processor(text=chat(model), images=[picture], return_tensors="pt")["pixel_values"]


def test_grids_are_the_processors_tiles_then_the_thumbnail(model):
    for size, (columns, rows) in SIZES[model.family.parts["wrapper"].model_type].items():
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        labels = [grid.label for grid in geometry.grids]
        if rows * columns == 1:
            assert labels == ["image"], size
        else:
            assert labels == [f"tile {r},{c}" for r in range(rows) for c in range(columns)] + ["thumbnail"], size
        assert len(labels) == crops(model, image(*size)).shape[0], size
        assert all((g.rows, g.columns, g.fold) == (4, 4, 2) and g.covered.all() for g in geometry.grids)
        tiles = torch.cat([g.boxes for g in geometry.grids if g.label != "thumbnail"])
        area = ((tiles[:, 2] - tiles[:, 0]) * (tiles[:, 3] - tiles[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64)), size


def test_a_lit_pixel_lands_in_the_cell_of_the_token_whose_box_holds_it(model):
    cell = TILE // 4  # a token's pixels a side in its crop
    for size in SIZES[model.family.parts["wrapper"].model_type]:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        for index, grid, token, x, y in centres(geometry, smallest=2):  # a pixel's probe singles out no less
            assert geometry.token_at(x, y, index) == token
            seen = crops(model, lit(*size, x, y))[index, 0]
            row, column = divmod(int(seen.float().argmax()), seen.shape[-1])
            assert (row // cell, column // cell) == divmod(token, grid.columns), (size, grid.label, token)


@pytest.mark.parametrize("crop, token", [(0, 0), (0, 5), (0, 15), (4, 6)])
def test_a_token_is_its_block_of_its_crops_patches(model, crop, token):
    pictures, prompt = [image(112, 84)], chat(model)
    (geometry,) = model.vision.geometry(prompt, pictures)
    block = patch_block(geometry.grids[crop], token)
    assert moved_features(model, prompt, pictures, crop, block) == [geometry.span(crop).start + token]
