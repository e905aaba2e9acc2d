"""Qianfan-OCR, served by vlreg-internvl: what the suite (`test_conformance.TestQianfanOCR`)
cannot say.

* each image's geometry counts its ``<IMG_CONTEXT>`` tokens at the mask's positions, tile
  after tile, though the prompt holds ``<image>`` (the processor expands it);
* a prompt's ``<image>`` placeholders are counted against the images before the processor runs;
* a block adds its sublayers' outputs times their layer scale (``lambda_1``, ``lambda_2``).
"""

from __future__ import annotations

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "qianfan_ocr"
PICTURES = (image(112, 84), image(56, 56, seed=1))






def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    assert prompt.count("<image>") == 2 and "<IMG_CONTEXT>" not in prompt
    geometries = model.vision.geometry(prompt, list(PICTURES))
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    assert [geometry.tokens for geometry in geometries] == [5 * 16, 16]  # 2 x 2 tiles and a thumbnail; one tile


def test_placeholders_are_counted_against_the_images(model):
    with pytest.raises(ValueError, match=r"holds 2 image placeholders \('<image>'\), but 1 image was given"):
        with model.trace(chat(model, images=2), images=[PICTURES[0]]):
            model.logits.save()


def test_a_block_adds_its_sublayers_times_their_layer_scale(model):
    block = model.vision.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        attention = block.self_attn.output[0].save()
        added = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
    torch.testing.assert_close(added.reshape(attention.shape), attention * block._module.lambda_1)
    torch.testing.assert_close(mlp_added.reshape(mlp.shape), mlp * block._module.lambda_2)
