"""PaddleOCR-VL, served by vlreg-paddleocr-vl: what the suite (`test_conformance.TestPaddleOCRVL`)
cannot say.

* each image's geometry counts the image tokens at the mask's positions, its grid the 2 x 2
  blocks of the processor's ``image_grid_thw``;
* the tower's patches run in raster order and the projector merges each 2 x 2 block:
  ``to_scatter_order`` puts a token's patches together, so the projector's output for a token
  is its own four patches', and an edit of one patch moves only its token;
* an edit of the learned positions reaches the logits.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "paddleocr_vl"
PICTURES = (image(112, 84), image(56, 112, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_a_patch_reaches_only_its_token(model):
    prompt, pictures = chat(model), [PICTURES[0]]
    grid_thw = model.processor(text=prompt, images=pictures, return_tensors="pt")["image_grid_thw"]
    with model.trace(prompt, images=pictures):
        plain = model.vision.image_features.save()
    patch = 5 * int(grid_thw[0, 2]) + 3  # row 5, column 3 of the raster: token (2, 1)
    with model.trace(prompt, images=pictures):
        model.vision.tower_output[0, patch] = 0
        edited = model.vision.image_features.save()
    moved = (edited - plain).abs().amax(-1) > 0
    columns = int(grid_thw[0, 2]) // 2
    assert moved.nonzero().flatten().tolist() == [2 * columns + 1]
    order = model.vision.to_scatter_order(torch.arange(int(grid_thw.prod())), grid_thw, dim=0)
    assert patch in order[4 * (2 * columns + 1): 4 * (2 * columns + 2)].tolist()


def test_an_edit_of_the_positions_reaches_the_logits(model):
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURES[0]]):
        plain = model.logits.save()
    with model.trace(prompt, images=[PICTURES[0]]):
        model.vision.position_embeddings[:] = 0
        edited = model.logits.save()
    assert not torch.allclose(plain, edited)
