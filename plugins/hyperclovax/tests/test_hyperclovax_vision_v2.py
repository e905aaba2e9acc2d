"""HyperCLOVA X SEED Vision, served by vlreg-hyperclovax: what the suite
(`test_conformance.TestHyperCLOVAXVisionV2`) cannot say.

* the logits are ``lm_head``'s output times ``text_config.logits_scaling``;
* the blocks receive the embeddings times ``embedding_multiplier``: the features doubled at the
  image tokens;
* a block adds each sublayer's post-normed output times ``residual_multiplier``;
* the geometry counts the image tokens at the mask's positions.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "hyperclovax_vision_v2"
PICTURES = (image(112, 168), image(84, 56, seed=1))


def test_the_logits_are_lm_heads_output_scaled(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        unscaled = model.uncapped_logits.save()
        logits = model.logits.save()
    assert model._module.config.text_config.logits_scaling == 0.25
    torch.testing.assert_close(logits, unscaled * 0.25)


def test_the_blocks_receive_the_features_times_the_embedding_multiplier(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert model._module.config.text_config.embedding_multiplier == 2.0
    torch.testing.assert_close(first[mask], features * 2.0)


def test_a_block_adds_its_post_normed_sublayers_times_the_residual_multiplier(model):
    block = model.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        stream = block.input.save()
        raw = block.self_attn.output[0].save()
        attention = block.self_attn.attention_output.save()
        mlp = block.mlp.mlp_output.save()
        out = block.layer_output.save()
    assert block.residual_multiplier == 0.5
    torch.testing.assert_close(attention, block.post_norm1._module(raw), rtol=0, atol=0)
    torch.testing.assert_close(out, stream + 0.5 * attention + 0.5 * mlp)
    assert not torch.allclose(out, stream + attention + mlp)


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)
