"""LFM2-VL's declared grids against its processor and model.

* an image's grids are the crops its image processor cuts, in order: one resized crop, or
  the tiles (4 x 4 tokens of 2 x 2 patches) and then the thumbnail;
* a crop's grid is its own patches, not the padding NaFlex adds after them: the grid's
  patches are the crop's ``pixel_attention_mask``, fewer than the padded row where the crop
  is smaller than the largest;
* each token's box is over the pixels the processor puts in that token's cell: a probe
  lit at the box's centre is brightest in that token's patches of its crop (among the
  crop's own patches: the padding's zeros are brighter than black);
* each token is its 2 x 2 block of its crop's patches: changing those patches of the last
  tower block changes that token's features and no other's, and changing the padding
  changes none.
"""

from __future__ import annotations

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import centres, image, lit, moved_features, patch_block

CHECKPOINT = "lfm2_vl"

#: (width, height) -> the crops the processor cuts, worked out by hand from its rule (a token
#: is 8 pixels; one crop up to 16 tokens, or where the image rounded to whole tokens passes
#: twice that, tiles of the aspect closest among 2 to 4 and a thumbnail of at most 16 tokens).
SIZES = {
    (40, 40): ["image 4x4"],  # 5 x 5 tokens rounded, downscaled to 16
    (16, 16): ["image 2x2"],  # 2 x 2: min_image_tokens exactly
    (48, 32): ["image 3x4"],  # 4 x 6 rounded, downscaled: a 6 x 8 patch crop padded to 64
    (112, 84): ["tile 0,0", "tile 0,1", "tile 1,0", "tile 1,1", "thumbnail 3x4"],  # aspect 1.33: 2 x 2
    (64, 50): ["tile 0,0", "tile 0,1", "tile 1,0", "tile 1,1", "thumbnail 3x4"],  # 6 x 8 rounded, past 32
    (150, 40): ["tile 0,0", "tile 0,1", "tile 0,2", "tile 0,3", "thumbnail 2x7"],  # aspect 3.75: 4 x 1
    (30, 120): ["tile 0,0", "tile 1,0", "tile 2,0", "tile 3,0", "thumbnail 8x2"],  # aspect 0.25: 1 x 4
}


def encoding(model, picture):
    return model.processor(text=chat(model), images=[picture], return_tensors="pt")


def label(grid) -> str:
    return grid.label if grid.label.startswith("tile") else f"{grid.label} {grid.rows}x{grid.columns}"


def test_grids_are_the_processors_crops_without_their_padding(model):
    padded = 0
    for size, expected in SIZES.items():
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        assert [label(grid) for grid in geometry.grids] == expected, size
        encoded = encoding(model, image(*size))
        own = encoded["pixel_attention_mask"].sum(-1).tolist()
        assert len(own) == len(geometry.grids)
        for grid, patches, shape in zip(geometry.grids, own, encoded["spatial_shapes"].tolist()):
            assert grid.fold == 2 and grid.covered.all()
            assert (grid.rows * 2, grid.columns * 2) == tuple(shape) and grid.tokens * 4 == patches, (size, grid.label)
            padded += patches < encoded["pixel_values"].shape[1]
        tiles = torch.cat([g.boxes for g in geometry.grids if g.label != "thumbnail"])
        area = ((tiles[:, 2] - tiles[:, 0]) * (tiles[:, 3] - tiles[:, 1])).sum()
        assert torch.isclose(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64)), size
    assert padded, "no crop is padded: the test would not reach NaFlex's padding"


def test_a_lit_pixel_lands_in_the_patches_of_the_token_whose_box_holds_it(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        for index, grid, token, x, y in centres(geometry, smallest=2):  # a pixel's probe singles out no less
            assert geometry.token_at(x, y, index) == token
            encoded = encoding(model, lit(*size, x, y))
            own = int(encoded["pixel_attention_mask"][index].sum())
            brightness = encoded["pixel_values"][index, :own].amax(-1)  # the crop's own patches, raster order
            row, column = divmod(int(brightness.argmax()), grid.columns * grid.fold)
            assert (row // grid.fold, column // grid.fold) == divmod(token, grid.columns), (size, grid.label, token)


@pytest.mark.parametrize("crop, token", [(0, 0), (0, 5), (3, 15), (4, 0), (4, 11)])
def test_a_token_is_its_block_of_its_crops_patches(model, crop, token):
    pictures, prompt = [image(112, 84)], chat(model)
    (geometry,) = model.vision.geometry(prompt, pictures)
    block = patch_block(geometry.grids[crop], token)
    assert moved_features(model, prompt, pictures, crop, block) == [geometry.span(crop).start + token]


def test_the_padding_after_a_crop_reaches_no_token(model):
    pictures, prompt = [image(112, 84)], chat(model)
    (geometry,) = model.vision.geometry(prompt, pictures)
    thumbnail = geometry.grids[-1]
    patches = thumbnail.tokens * thumbnail.fold**2
    with model.trace(prompt, images=pictures):
        clean = model.vision.image_features.save()
    with model.trace(prompt, images=pictures):
        rows = model.vision.layers[-1].layer_output
        assert rows.shape[1] > patches  # the thumbnail's row runs past its patches
        rows[len(geometry.grids) - 1, patches:] += 1
        features = model.vision.image_features.save()
    assert torch.equal(features, clean)
