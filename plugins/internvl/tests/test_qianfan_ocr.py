"""Qianfan-OCR, served by vlreg-internvl: what the suite (`test_conformance.TestQianfanOCR`)
cannot say.

* the logits a trace reads are transformers' own (its processor and class, loaded apart);
* an edit of ``vision.image_features`` reaches the logits, from the first image token on;
* each image's geometry counts its ``<IMG_CONTEXT>`` tokens at the mask's positions, tile
  after tile, though the prompt holds ``<image>`` (the processor expands it);
* a prompt's ``<image>`` placeholders are counted against the images before the processor runs;
* a block adds its sublayers' outputs times their layer scale (``lambda_1``, ``lambda_2``).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "qianfan_ocr"
PICTURES = (image(112, 84), image(56, 56, seed=1))


def test_the_logits_are_transformers_own(model):
    path, prompt = build(CHECKPOINT), chat(model, images=2)
    with model.trace(prompt, images=list(PICTURES)):
        logits = model.logits.save()
    own = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager").eval()
    inputs = AutoProcessor.from_pretrained(path)(text=prompt, images=list(PICTURES), return_tensors="pt")
    with torch.no_grad():
        expected = own(**inputs).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def test_an_edit_of_the_features_reaches_the_logits(model):
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURES[0]]):
        mask = model.vision.image_token_mask.save()
        clean = model.logits.save()
    with model.trace(prompt, images=[PICTURES[0]]):
        model.vision.image_features[:] = 0
        edited = model.logits.save()
    first = int(mask[0].nonzero()[0])
    moved = (edited - clean).abs().amax(-1)[0] > 0
    assert not moved[:first].any() and moved[first:].all()


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
