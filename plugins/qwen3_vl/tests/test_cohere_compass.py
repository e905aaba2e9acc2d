"""Cohere's North (``cohere_compass``), served by vlreg-qwen3-vl: what the suite
(`test_conformance.TestCohereCompass`) cannot say.

* the logits are ``lm_head``'s output scaled by the text config's ``logit_scale``;
* the geometry counts the image tokens at the mask's positions;
* a text block is parallel: the attention and the MLP both read ``input_layernorm``'s output,
  and the block returns the stream plus both; DeepStack adds its tap after it.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "cohere_compass"
PICTURES = (image(128, 96), image(64, 160, seed=1))


def test_the_logits_are_lm_heads_output_scaled(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        unscaled = model.uncapped_logits.save()
        logits = model.logits.save()
    assert model._module.config.text_config.logit_scale == 0.5
    torch.testing.assert_close(logits, unscaled * 0.5)


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, list(PICTURES))
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    assert [geometry.tokens for geometry in geometries] == [12, 10]  # 4 x 3 and 2 x 5 tokens of 32 pixels


def test_a_block_is_parallel_then_deepstack_adds_its_tap(model):
    block = model.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        mask = model.vision.image_token_mask.save()
        stream = block.input.save()
        normed = block.input_layernorm.output.save()
        attention_input = block.self_attn.input.save()
        attention_output = block.self_attn.attention_output.save()
        mlp_input = block.mlp.input.save()
        mlp_output = block.mlp.mlp_output.save()
        out = block.layer_output.save()
        tap = block.deepstack_output.save()
        after = model.layers[1].input.save()
    assert torch.equal(attention_input, normed) and torch.equal(mlp_input, normed)
    torch.testing.assert_close(out, stream + attention_output + mlp_output)
    assert torch.equal(after[mask], out[mask] + tap) and torch.equal(after[~mask], out[~mask])
