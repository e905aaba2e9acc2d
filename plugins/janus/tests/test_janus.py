"""What Janus promises beyond the conformance suite: its chat format and image expansion,
the parts it reuses, that its VQ model runs on no forward that reads an image (and
``vision.image_codes`` says so), what the aligner reads,
`tower_patterns` on padded images, and Janus-Pro's processor, which writes a system
prompt before every text."""

from __future__ import annotations

import collections

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable, analysis
from vlreg.core.host import plugins
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image
from vlreg_janus import plugin
from vlreg_janus.checkpoints import TOKENS

CHECKPOINT = "janus"

PICTURE = image(112, 84)


def test_the_chat_format_and_the_image_expansion(model):
    prompt = chat(model)
    assert prompt == "<|User|>: <image_placeholder>\nWhat is in this image?\n\n<|Assistant|>:"
    ids = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    assert tokens[:2] == ["<｜begin▁of▁sentence｜>", "<|User|>"]  # the tokenizer adds the BOS, as DeepSeek's does
    start = tokens.index("<begin_of_image>")
    assert tokens[start + 1 : start + 1 + TOKENS] == ["<image_placeholder>"] * TOKENS
    assert tokens[start + 1 + TOKENS] == "<end_of_image>"


def test_the_parts_and_who_serves_them(model):
    assert model.family.name == "janus"
    assert model.family.plugins["wrapper"] is model.family.plugins["vision"] is plugin
    assert model.family.parts["text"].model_type == "llama"
    assert plugins.distribution(model.family.plugins["text"]).name == "vlreg-llava"  # reused by claim, nothing imported
    vision = model.vision
    assert (vision.class_tokens, vision.patch_size, vision.image_size, vision.num_layers) == (0, 7, 56, 2)
    assert vision.layers[0].self_attn.projection_layer.weight.shape == (32, 32)  # Janus's o_proj


def test_the_vq_model_runs_on_no_forward_that_reads_an_image(model):
    inner = model._module.model
    generation = {name: getattr(inner, name) for name in ("vqmodel", "generation_embeddings", "generation_aligner",
                                                          "generation_head")}
    calls = collections.Counter()
    hooks = [module.register_forward_hook(lambda *_, name=name: calls.update([name])) for name, module in generation.items()]
    try:
        with model.trace(chat(model), images=[PICTURE]):
            features = model.vision.image_features.save()
    finally:
        for hook in hooks:
            hook.remove()
    assert not calls and features.shape == (TOKENS, model.hidden_size)
    reason = model.support()["vision.image_codes"]
    assert "only to generate images" in reason and "vision.image_features" in reason
    with pytest.raises(Unavailable, match="only to generate images"):
        with model.trace(chat(model), images=[PICTURE]):
            model.vision.image_codes.save()


def test_the_aligner_reads_the_tower_output_every_patch_normed(model):
    with model.trace(chat(model), images=[PICTURE]):
        last = model.vision.layers[-1].layer_output.save()
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    assert torch.equal(fed, tower) and tower.shape == (1, TOKENS, model.vision.vision_hidden_size)
    torch.testing.assert_close(tower, model.vision.norm._module(last))
    assert torch.equal(projected.reshape(features.shape), features)
    assert "vision.tower_output" not in model.read_only()


def test_tower_patterns_on_a_square_image_and_refused_on_a_padded_one(model):
    square = image(84, 84)
    found = analysis.tower_patterns(model, chat(model), [square])
    assert found.patterns[0].shape[-1] == TOKENS
    with pytest.raises(Unavailable, match="padding"):
        analysis.tower_patterns(model, chat(model), [PICTURE])


def test_janus_pros_system_prompt_comes_before_the_turn_and_the_image_lands_where_it_says():
    pro = load("janus_pro")
    prompt = chat(pro)
    ids = pro.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    text = pro.tokenizer.decode(ids)
    assert text.startswith("<｜begin▁of▁sentence｜>You are a helpful language and vision assistant.")
    assert text.index("<|User|>") > text.index("natural language.")
    with pro.trace(prompt, images=[PICTURE]):
        mask = pro.vision.image_token_mask.save()
        features = pro.vision.image_features.save()
        first = pro.layers[0].input.save()
    (geometry,) = pro.vision.geometry(prompt, [PICTURE])
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    assert torch.equal(first[mask], features) and int(mask.sum()) == TOKENS


def test_a_text_only_load_of_janus_pro_has_no_processor_so_no_system_prompt():
    """The system prompt is the processor's: a load for text generation (no processor)
    runs the prompt as the tokenizer encodes it, without it."""
    import warnings

    pro = load("janus_pro")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text_only = StandardizedTransformer(str(build("janus_pro")), dispatch=True, device="cpu")
    prompt = "<|User|>: What is in this image?\n\n<|Assistant|>:"
    with pro.trace(prompt):
        with_system = pro.input_ids.save()
    with text_only.trace(prompt):
        without = text_only.input_ids.save()
    assert without.shape[1] < with_system.shape[1] and torch.equal(with_system[0, -without.shape[1] + 1 :], without[0, 1:])


def test_two_invokes_each_get_their_own_image(model):
    """A square image in one invoke, a padded one in the other: each invoke's features are
    what it gets alone, and zeroing one's leaves the other's logits as they are alone."""
    square, longer = image(84, 84, seed=3), "What is in this image? Describe the picture."
    with model.trace(chat(model), images=[square]):
        alone = model.vision.image_features.save()
    with model.trace(chat(model, text=longer), images=[PICTURE]):
        expected = model.logits.save()
    with model.trace() as tracer:
        with tracer.invoke(chat(model), images=[square]):
            first = model.vision.image_features.clone().save()  # before the edit below
            model.vision.image_features[:] = 0
        with tracer.invoke(chat(model, text=longer), images=[PICTURE]):
            logits = model.logits.save()
    torch.testing.assert_close(first, alone)
    torch.testing.assert_close(logits[:, -expected.shape[1]:], expected)
