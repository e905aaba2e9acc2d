"""Perception LM's and FastVLM's declared grids against their processors and models.

* Perception LM: an image's grids are the thumbnail, then the tiles its processor's rule
  cuts (worked out by hand below), 4 x 4 tokens a crop; a lit pixel lands in the patches
  of the token whose box holds it, in that token's crop; a token is its 2 x 2 block of its
  crop's patches (an edit of them moves that token's features and no other's);
* FastVLM: one grid over the centre crop, a token per 8-pixel cell; a lit pixel lands in
  the token whose box holds it, the crop's margins in no box; a token is its cell of the
  tower's last grid (the projector maps each cell alone). A cell's box is the pixels its
  stride covers: FastViT's convolutions and attention stage see beyond it.
"""

from __future__ import annotations

import math

import pytest
import torch

from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit, moved_features, patch_block

#: (width, height) -> (columns, rows) of 56-pixel tiles, by hand from the rule (at most 4
#: tiles): the canvas that holds the image and lets it grow most, else the closest aspect.
TILES = {
    (112, 84): (2, 2),  # only 2 x 2 holds it
    (40, 40): (2, 2),  # every canvas holds it; 2 x 2 lets it grow most
    (150, 40): (4, 1),  # a row of 4 holds it; a row of 3 lets it grow less
    (30, 120): (1, 4),
    (300, 200): (2, 2),  # no canvas holds it: the closest aspect (1.0) at most tiles
}


@pytest.fixture(scope="module")
def plm():
    return load("perception_lm")


@pytest.fixture(scope="module")
def fast():
    return load("fast_vlm")


def brightest(pixels: torch.Tensor) -> tuple[int, int]:
    """(row, column) of the brightest pixel of a ``[3, height, width]`` crop."""
    flat = int(pixels.amax(0).argmax())
    return divmod(flat, pixels.shape[-1])


def centres(grid):
    """Each token with a box wide enough for a one-pixel probe, and its box's centre."""
    for token in range(grid.tokens):
        x0, y0, x1, y1 = grid.boxes[token].tolist()
        if not math.isnan(x0) and min(x1 - x0, y1 - y0) >= 2:
            yield token, (x0 + x1) / 2, (y0 + y1) / 2


# -- Perception LM -------------------------------------------------------------------


def test_perception_lm_grids_are_the_thumbnail_then_the_tiles(plm):
    for size, (columns, rows) in TILES.items():
        (geometry,) = plm.vision.geometry(chat(plm), [image(*size)])
        labels = ["thumbnail"] + [f"tile {r},{c}" for r in range(rows) for c in range(columns)]
        assert [grid.label for grid in geometry.grids] == labels, size
        assert all((grid.rows, grid.columns, grid.fold) == (4, 4, 2) and grid.covered.all() for grid in geometry.grids)
        encoding = plm.processor(text=chat(plm), images=[image(*size)], return_tensors="pt")
        assert encoding["pixel_values"].shape[1] == len(labels)
        assert int((encoding["input_ids"] == plm._module.config.image_token_id).sum()) == geometry.tokens
        tiles = torch.cat([grid.boxes for grid in geometry.grids[1:]])
        area = ((tiles[:, 2] - tiles[:, 0]) * (tiles[:, 3] - tiles[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64)), size


@pytest.mark.parametrize("size", sorted(TILES))
def test_a_lit_pixel_lands_in_the_patches_of_the_token_whose_box_holds_it(plm, size):
    (geometry,) = plm.vision.geometry(chat(plm), [image(*size)])
    patch = plm.processor.patch_size
    for index, grid in enumerate(geometry.grids):
        for token, x, y in centres(grid):
            assert geometry.token_at(x, y, index) == token
            pixels = plm.processor(text=chat(plm), images=[lit(*size, x, y)], return_tensors="pt")["pixel_values"]
            row, column = brightest(pixels[0, index])
            assert (row // patch // grid.fold, column // patch // grid.fold) == divmod(token, grid.columns), (
                size, grid.label, token)


@pytest.mark.parametrize("crop, token", [(0, 0), (0, 5), (2, 15), (4, 10)])
def test_a_perception_lm_token_is_its_block_of_its_crops_patches(plm, crop, token):
    pictures, prompt = [image(112, 84)], chat(plm)
    (geometry,) = plm.vision.geometry(prompt, pictures)
    block = patch_block(geometry.grids[crop], token, first=plm.vision.class_tokens)
    assert moved_features(plm, prompt, pictures, crop, block) == [geometry.span(crop).start + token]


# -- FastVLM ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(112, 84), (84, 112), (32, 32), (40, 33), (100, 31)])
def test_fast_vlm_is_one_grid_over_the_centre_crop(fast, size):
    (geometry,) = fast.vision.geometry(chat(fast), [image(*size)])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns) == (4, 4) and grid.covered.all()
    width, height = size
    short = min(width, height)
    kept = short * short  # the crop is the image's centred square, scaled to 32 pixels
    area = ((grid.boxes[:, 2] - grid.boxes[:, 0]) * (grid.boxes[:, 3] - grid.boxes[:, 1])).sum()
    assert abs(float(area) - kept) / kept < 0.1, size
    with fast.trace(chat(fast), images=[image(*size)]):
        mask = fast.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)


@pytest.mark.parametrize("size", [(112, 84), (84, 112), (40, 33)])
def test_a_lit_pixel_lands_in_the_cell_of_the_token_whose_box_holds_it(fast, size):
    (geometry,) = fast.vision.geometry(chat(fast), [image(*size)])
    (grid,) = geometry.grids
    patch = fast.processor.patch_size
    for token, x, y in centres(grid):
        assert geometry.token_at(x, y) == token
        pixels = fast.processor(text=chat(fast), images=[lit(*size, x, y)], return_tensors="pt")["pixel_values"]
        row, column = brightest(pixels[0])
        assert (row // patch, column // patch) == divmod(token, grid.columns), (size, token)
    margin = 1 if size[0] > size[1] else None  # a wide image's left margin is cropped away
    if margin is not None:
        with pytest.raises(ValueError, match="no token"):
            geometry.token_at(margin, size[1] / 2)


@pytest.mark.parametrize("token", [0, 5, 15])
def test_a_fast_vlm_token_is_its_cell_of_the_last_grid(fast, token):
    pictures, prompt = [image(112, 84)], chat(fast)
    with fast.trace(prompt, images=pictures):
        clean = fast.vision.image_features.save()
    with fast.trace(prompt, images=pictures):
        fast.vision.tower_output[0, token] += 1
        features = fast.vision.image_features.save()
    moved = (features != clean).any(-1).nonzero().flatten().tolist()
    assert moved == [token]
