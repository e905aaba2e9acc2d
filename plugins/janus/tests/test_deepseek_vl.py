"""What DeepSeek-VL promises beyond the conformance suite: its chat format and image
expansion, the parts it reuses, what the aligner reads, and SigLIP's pooling head, which
runs and reaches nothing."""

from __future__ import annotations

import torch

from vlreg.core.host import plugins
from vlreg.testing import chat
from vlreg.testing.conformance import image
from vlreg_janus.checkpoints import DEEPSEEK_VL_SYSTEM, TOKENS

CHECKPOINT = "deepseek_vl"

PICTURE = image(112, 84)


def test_the_chat_format_and_the_image_expansion(model):
    prompt = chat(model)
    assert prompt == f"{DEEPSEEK_VL_SYSTEM}\n\nUser: <image_placeholder>What is in this image?\n\nAssistant:"
    ids = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    assert tokens[0] == "<｜begin▁of▁sentence｜>"
    start = tokens.index("<image_placeholder>")
    assert tokens[start : start + TOKENS] == ["<image_placeholder>"] * TOKENS  # no begin/end-of-image markers
    assert tokens[start + TOKENS] != "<image_placeholder>"


def test_the_parts_and_who_serves_them(model):
    assert model.family.name == "janus" and model.family.parts["wrapper"].model_type == "deepseek_vl"
    assert {kind: part.model_type for kind, part in model.family.parts.items()} == {
        "wrapper": "deepseek_vl", "text": "llama", "vision": "siglip_vision_model"}
    assert model.family.plugins["text"] is model.family.plugins["vision"]
    assert plugins.distribution(model.family.plugins["text"]).name == "vlreg-llava"  # reused by claim, nothing imported
    vision = model.vision
    assert (vision.class_tokens, vision.patch_size, vision.image_size, vision.num_layers) == (0, 7, 56, 2)
    assert type(model._module.model.vision_model).__name__ == "SiglipVisionModel"
    assert model.embed_tokens.weight is model.lm_head.weight  # DeepSeek-VL ties them


def test_the_aligner_reads_every_patch_of_the_tower_output_and_the_head_reaches_nothing(model):
    head = model._module.model.vision_model.head
    calls = []
    hook = head.register_forward_hook(lambda *_: calls.append(1))
    try:
        with model.trace(chat(model), images=[PICTURE]):
            tower = model.vision.tower_output.save()
            fed = model.projector.input.save()
            projected = model.projector.output.save()
            features = model.vision.image_features.save()
            logits = model.logits.save()
    finally:
        hook.remove()
    assert calls == [1]  # SigLIP's pooling head runs ...
    assert torch.equal(fed, tower) and tower.shape == (1, TOKENS, model.vision.vision_hidden_size)
    assert torch.equal(projected.reshape(features.shape), features) and features.shape == (TOKENS, model.hidden_size)
    with model.trace(chat(model), images=[PICTURE]):
        model.vision.head.output[:] = 1e3  # ... and its output goes nowhere
        pooled = model.vision.head.output.save()
        edited = model.logits.save()
    assert (pooled == 1e3).all()
    torch.testing.assert_close(edited, logits)
