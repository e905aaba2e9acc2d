"""Ovis 2, served by vlreg-ovis: what the suite (`test_conformance.TestOvis2`) cannot say.

* each image's geometry counts the image tokens at the mask's positions: a square of
  ``image_seq_length`` tokens, each folding ``hidden_stride`` x ``hidden_stride`` patches;
* ``vision.visual_words`` is a distribution over the visual words for each image token, and
  the features are the table's rows weighted by it (the structure tokens' rows left out);
* an edit of the visual words reaches the features.
"""

from __future__ import annotations

import math

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "ovis2"
PICTURES = (image(112, 84), image(84, 56, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, list(PICTURES))
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    side = math.isqrt(model.processor.image_seq_length)
    for geometry in geometries:
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens, grid.fold) == (side, side, side * side, 2)


def test_crops_have_no_declared_geometry_and_say_so(model):
    with pytest.raises(Unavailable, match="crop_to_patches=False"):
        model.vision.geometry(chat(model), [PICTURES[0]], crop_to_patches=True)


def test_the_features_are_the_tables_rows_weighted_by_the_visual_words(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        words = model.vision.visual_words.save()
        features = model.vision.image_features.save()
    table = model.projector._module.weight
    assert words.shape == (1, 4, table.shape[0] - 5)
    torch.testing.assert_close(words.sum(-1), torch.ones(1, 4))
    expected = words[0] @ table[: words.shape[-1]]
    torch.testing.assert_close(features, expected)


def test_an_edit_of_the_visual_words_reaches_the_features(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        words = model.vision.visual_words
        words[:] = 0
        words[..., 3] = 1
        features = model.vision.image_features.save()
    row = model.projector._module.weight[3]
    torch.testing.assert_close(features, row.expand_as(features))
