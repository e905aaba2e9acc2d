"""Every helper of `vlreg.analysis` on each Gemma family: it runs and gives the shapes the
family's geometry says, or refuses saying why (Gemma 4 unified has no tower blocks to
take a pattern of; PaliGemma's processor takes no prompt without an image)."""

import inspect

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable, analysis
from vlreg.testing import build
from vlreg.testing.conformance import image

FAMILIES = ("gemma3", "paligemma", "paligemma2", "gemma4", "gemma4_unified")
PICTURE, OTHER = image(112, 84), image(112, 84, seed=7)


def load(name, **options):
    return StandardizedTransformer(str(build(name)), dispatch=True, device="cpu", attn_implementation="eager", **options)


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return load(request.param, task="image-text-to-text")


def chat(model):
    content = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=False)


def _calls(model, prompt):
    """Each helper of `vlreg.analysis`, called on the model as a user would."""

    def steered():
        with model.trace(prompt, images=[PICTURE]):
            analysis.steer(model, [0], torch.ones(model.hidden_size), positions="image")
            logits = model.logits.save()
        return logits

    def skipped():
        with model.trace(prompt, images=[PICTURE]):
            analysis.skip_layers(model, 1, 1)
            logits = model.logits.save()
        return logits

    def projected():
        with model.trace(prompt, images=[PICTURE]):
            stream = model.layers[0].layer_output.save()
        return analysis.top_tokens(model, analysis.project_on_vocab(model, stream[0, -1]), k=3)

    return {
        "logit_lens": lambda: analysis.logit_lens(model, prompt, [PICTURE], top=2).top_ids[0].shape[1],
        "ablate_image": lambda: analysis.ablate_image(model, prompt, [PICTURE]).received.shape[0],
        "occlusion": lambda: analysis.occlusion(model, prompt, [PICTURE], batch=40).scores.shape[0],
        "patch_image": lambda: analysis.patch_image(model, prompt, [PICTURE], [OTHER]).effects.shape[0],
        "attention_to_images": lambda: analysis.attention_to_images(model, prompt, [PICTURE]).weights[0].shape[-1],
        "tower_patterns": lambda: analysis.tower_patterns(model, prompt, [PICTURE]).patterns[0].shape[-1],
        "token_id": lambda: analysis.token_id(model, model.tokenizer.convert_ids_to_tokens(model._module.config.image_token_id)),
        "project_on_vocab": projected,
        "top_tokens": projected,
        "next_token_probs": lambda: analysis.next_token_probs(model, prompt, [PICTURE]).shape[0],
        "steer": steered,
        "skip_layers": skipped,
        "compare_streams": lambda: analysis.compare_streams(model, model, "The quick brown fox"),
    }


def test_every_analysis_helper_runs_or_says_why_not(model):
    name = model._module.config.model_type
    prompt = chat(model)
    helpers = [helper for helper in analysis.__all__ if inspect.isfunction(getattr(analysis, helper))]
    calls = _calls(model, prompt)
    assert not set(helpers) - set(calls), f"helpers this test does not call: {set(helpers) - set(calls)}"
    refused = {
        "tower_patterns": (Unavailable, "has no blocks") if name == "gemma4_unified" else None,
        "compare_streams": (ValueError, "images") if name == "paligemma" else None,
        # block 1 of the tiny Gemma 4 stores the keys and values block 3 reuses
        "skip_layers": (ValueError, r"layers \[3\] reuse its keys and values") if name == "gemma4" else None,
    }
    found = {}
    for helper in helpers:
        if refused.get(helper):
            error, reason = refused[helper]
            with pytest.raises(error, match=reason):
                calls[helper]()
        else:
            found[helper] = calls[helper]()
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    tokens = geometry.tokens
    assert found["logit_lens"] == found["ablate_image"] == found["occlusion"] == found["attention_to_images"] == tokens
    if "tower_patterns" in found:
        assert found["tower_patterns"] == tokens
    assert found["token_id"] == model._module.config.image_token_id
    assert found["patch_image"] == model.num_layers
    assert len(found["top_tokens"]) == 3 and found["next_token_probs"] == model.vocab_size
    with model.trace(prompt, images=[PICTURE]):
        clean = model.logits.save()
    assert not torch.equal(found["steer"], clean)
    assert "skip_layers" not in found or not torch.equal(found["skip_layers"], clean)
    if "compare_streams" in found:
        torch.testing.assert_close(found["compare_streams"], torch.ones(model.num_layers, dtype=torch.float64))


def test_paligemmas_text_model_compares_on_its_text_load():
    """The text helpers that take text alone run on PaliGemma loaded for text."""
    text = load("paligemma")
    torch.testing.assert_close(analysis.compare_streams(text, text, "The quick brown fox"),
                               torch.ones(text.num_layers, dtype=torch.float64))
