"""Granite-Docling, served by vlreg-granite: what the suite (`test_conformance.TestGraniteDocling`)
cannot say.

* the logits are ``lm_head``'s output divided by ``text_config.logits_scaling``;
* the blocks receive the embeddings times ``embedding_multiplier``;
* a block adds its sublayers times ``residual_multiplier``, then DeepStack adds its tap at the
  image tokens;
* the geometry counts the image tokens at the mask's positions: tiles, then the thumbnail.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "granite_docling"
PICTURES = (image(200, 120), image(64, 64, seed=1))


def test_the_logits_are_lm_heads_output_divided(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        unscaled = model.uncapped_logits.save()
        logits = model.logits.save()
    assert model._module.config.text_config.logits_scaling == 4.0
    torch.testing.assert_close(logits, unscaled / 4.0)


def test_a_block_adds_its_sublayers_scaled_then_deepstack_its_tap(model):
    block = model.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        stream = block.input.save()
        attention = block.self_attn.attention_output.save()
        mlp = block.mlp.mlp_output.save()
        out = block.layer_output.save()
        tap = block.deepstack_output.save()
        after = model.layers[1].input.save()
    assert block.residual_multiplier == 0.5
    torch.testing.assert_close(stream[mask], features * 2.0)  # embedding_multiplier
    torch.testing.assert_close(out, stream + 0.5 * attention + 0.5 * mlp)
    assert torch.equal(after[mask], out[mask] + tap) and torch.equal(after[~mask], out[~mask])


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, list(PICTURES))
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    # 200 x 120 pixels: 2 tiles of 2 x 2 tokens and the thumbnail; 64 x 64: one tile
    assert [[grid.label for grid in geometry.grids] for geometry in geometries] == [
        ["tile 0,0", "tile 0,1", "thumbnail"], ["tile 0,0"]]
    assert [geometry.tokens for geometry in geometries] == [12, 4]
