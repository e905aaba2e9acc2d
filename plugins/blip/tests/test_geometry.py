"""Where a BLIP-2 / InstructBLIP image token sits in its image: nowhere in particular.

An image token is one of the Q-Former's learned queries, and every query cross-attends to
every row of the tower, so no token stands for a part of the image: the geometry gives
each image one grid of ``num_query_tokens`` tokens (``"queries"``, 1 x queries), every
token's box the whole image (`QueryTokens.query_grids`). What is checked:

* the grids count the processor's image tokens (``num_query_tokens`` an image, whatever its
  size) and sit at the mask's positions;
* the box claim: a pixel lit anywhere in the image moves every query token's features, and
  an edit of any one of the tower's patches does too (a box smaller than the image would
  say some token does not see that pixel).
"""

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image, lit

CHECKPOINTS = ("blip-2", "instructblip")
BUILD_OPTIONS = {"num_query_tokens": 5}

SIZES = ((28, 28), (112, 84), (40, 150), (17, 21))


def _black(width, height):
    from PIL import Image

    return Image.new("RGB", (width, height), "black")


def test_each_image_is_its_queries_and_every_box_is_the_whole_image(model):
    for width, height in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(width, height)])
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, grid.label) == (1, 5, "queries")
        assert grid.boxes.tolist() == [[0.0, 0.0, width, height]] * 5
        with model.trace(chat(model), images=[image(width, height)]):
            mask = model.vision.image_token_mask.save()
        assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
        assert geometry.token_at(width - 1, height - 1) == geometry.token_at(0, 0) == 0


@pytest.mark.parametrize("x, y", [(0, 0), (111, 0), (55, 41), (3, 80)])
def test_a_pixel_lit_anywhere_moves_every_query_token(model, x, y):
    (geometry,) = model.vision.geometry(chat(model), [lit(112, 84, x, y)])
    assert geometry.token_at(x, y) == 0  # every box holds it; the first token is named
    features = []
    for picture in (_black(112, 84), lit(112, 84, x, y)):
        with model.trace(chat(model), images=[picture]):
            features.append(model.vision.image_features.save())
    moved = (features[1] - features[0]).abs().sum(-1)
    assert moved.shape == (geometry.tokens,) and bool((moved > 0).all())


@pytest.mark.parametrize("patch", [0, 7, 15])
def test_every_query_reads_every_patch(model, patch):
    """An edit of one patch's row of the tower's output (after the class token) moves every
    query's features."""
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        clean = model.vision.image_features.save()
    with model.trace(prompt, images=pictures):
        model.vision.tower_output[:, model.vision.class_tokens + patch] += 1
        edited = model.vision.image_features.save()
    assert bool(((edited - clean).abs().sum(-1) > 0).all())
