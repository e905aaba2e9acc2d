"""Inkling 2, served by vlreg-inkling: what the suite (`test_conformance.TestInkling2`) cannot say.

* each image's geometry counts the image tokens at the mask's positions, its grid the
  processor's ``image_grid_thw`` (tokens, not patches: the processor pads, never resizes);
* ``logits`` are ``lm_head``'s output through the wrapper's softcap module, cut to the
  unpadded vocabulary (the suite checks that only where the lens is served);
* a block that opens a group hands on its sublayers' outputs alone, its input kept among the
  stored states the next group's sublayers attend over;
* the tower's rows are each image's class token, then its patches: the merger drops the first.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image
from vlreg_inkling.wrappers import capped_and_cut

CHECKPOINT = "inkling2"
PICTURES = (image(24, 16), image(20, 36, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows, columns, frames * rows * columns)


def test_the_logits_are_lm_heads_output_capped_and_cut(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        uncapped = model.uncapped_logits.save()
        logits = model.logits.save()
    config = model._module.config.text_config
    torch.testing.assert_close(logits, capped_and_cut(model, uncapped))
    assert logits.shape[-1] == config.unpadded_vocab_size and logits.abs().max() <= config.final_logit_softcapping


def test_a_group_is_stored_at_its_first_block(model):
    assert [block.opens_group for block in model.layers] == [True, False]
    with model.trace(chat(model), images=[PICTURES[0]]):
        entering = model.layers[0].input.save()
        stored = model.layers[1].block_states.save()
    assert stored.shape[-2] == 1 and torch.equal(stored[..., 0, :], entering)


def test_the_towers_rows_are_a_class_token_then_the_patches(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        rows = model.vision.layers[-1].layer_output.save()
        features = model.vision.image_features.save()
    merger, width = model._module.model.vision_tower.merger, rows.shape[-1]
    patches = rows[0, 1:]  # one image: its class token first
    torch.testing.assert_close(merger(patches.reshape(-1, 4 * width)), features.reshape(-1, features.shape[-1]))
