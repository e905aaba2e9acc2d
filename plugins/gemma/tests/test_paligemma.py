"""What is particular to PaliGemma (1 and 2), beyond the conformance suite: its prompt,
its prefix attended bidirectionally, a token per SigLIP patch, Gemma 2's softcaps, and
`vlreg.analysis` on PaliGemma loaded for text. Every helper on each Gemma family's image
load, and what each refuses, is `AnalysisConformance` in ``test_conformance.py``."""

import pytest
import torch

from vlreg import analysis
from vlreg.testing import chat, load
from vlreg.testing.conformance import image

PICTURE = image(90, 60)
#: PaliGemma's task prefix: a caption, in English.
CAPTION = "caption en"


def test_the_prompt_is_the_images_then_the_prefix(loaded):
    model = loaded("paligemma")
    assert chat(model, text=CAPTION) == "<image>caption en"
    encoding = model.processor(text=chat(model, text=CAPTION), images=[PICTURE], return_tensors="pt")
    tokens = model.tokenizer.convert_ids_to_tokens(encoding["input_ids"][0])
    assert tokens[:17] == ["<image>"] * 16 + ["<bos>"]  # a token per SigLIP patch, then <bos>
    assert model.tokenizer.decode(encoding["input_ids"][0, 17:]) == "caption en\n"
    assert (encoding["token_type_ids"] == 0).all(), "the whole prompt is the prefix"


@pytest.mark.parametrize("name", ["paligemma", "paligemma2"])
def test_the_prefix_is_bidirectional_and_the_suffix_causal(loaded, name):
    """With a suffix (token_type_ids 1) the pattern of every block is full over the prefix
    (images and prompt) and causal over the suffix, which the prefix never sees; the
    pattern's description says so."""
    model = loaded(name)
    encoding = dict(model.processor(text=chat(model, text=CAPTION), images=[PICTURE], suffix="a red square", return_tensors="pt"))
    encoding.pop("labels")
    prefix = int((encoding["token_type_ids"][0] == 0).sum())
    patterns = []
    with model.trace(encoding):
        for block in model.layers:
            patterns.append(block.self_attn.attention_probabilities.save())
    window = getattr(model._module.config.text_config, "sliding_window", None) or 10**6
    for block, pattern in zip(model.layers, patterns):
        pattern = pattern[0]
        full = model._module.config.text_config.layer_types[block.block_index] == "full_attention" if name == "paligemma2" else True
        among = pattern[:, :prefix, :prefix]
        if full or prefix <= window:
            assert (among > 0).all(), "a prefix token does not see the whole prefix"
        assert pattern[:, :prefix, prefix:].abs().max() == 0, "the prefix sees the suffix"
        assert pattern[:, prefix:, prefix:].triu(1).abs().max() == 0, "a suffix token sees a later one"
        assert (pattern[:, prefix:, :prefix] > 0).any()
    assert "bidirectional over the prefix" in repr(model.layers[0].self_attn)


def test_a_token_per_patch_and_the_projector_is_linear(loaded):
    model = loaded("paligemma")
    with model.trace(chat(model, text=CAPTION), images=[PICTURE]):
        tower = model.vision.tower_output.save()
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    side = model.vision.image_size // model.vision.patch_size
    assert tower.shape[1] == side**2 == features.shape[0]
    torch.testing.assert_close(model.projector._module(tower), projected)
    (geometry,) = model.vision.geometry(chat(model, text=CAPTION), [PICTURE])
    assert (geometry.grids[0].rows, geometry.grids[0].columns, geometry.grids[0].fold) == (side, side, 1)


def test_gemma2s_logits_are_what_the_model_returns_after_the_final_softcap(loaded):
    """``logits`` is what PaliGemma 2 (Gemma 2) returns and samples from, ``lm_head``'s
    output softcapped, ``tanh(z / cap) * cap``; ``uncapped_logits`` is ``lm_head``'s output.
    The cap keeps every token's rank, not its probability: the distributions differ."""
    model = loaded("paligemma2")
    cap = model._module.config.text_config.final_logit_softcapping
    assert cap
    with model.trace(chat(model, text=CAPTION), images=[PICTURE]):
        readout = model.lm_head.output.save()
        uncapped = model.uncapped_logits.save()
        logits = model.logits.save()
        returned = model.output.logits.save()
    assert torch.equal(uncapped, readout) and torch.equal(logits, returned)
    torch.testing.assert_close(logits, torch.tanh(uncapped / cap) * cap)


def test_gemma2_scores_are_softcapped_before_the_mask(loaded):
    model = loaded("paligemma2")
    config = model._module.config.text_config
    block = model.layers[-1]
    with model.trace(chat(model, text=CAPTION), images=[PICTURE]):
        queries = block.self_attn.attention_queries.save()
        keys = block.self_attn.attention_keys.save()
        scores = block.self_attn.attention_scores.save()
    keys = keys.repeat_interleave(model.num_heads // model.num_kv_heads, dim=1)
    raw = queries @ keys.transpose(-1, -2) * config.query_pre_attn_scalar**-0.5
    capped = torch.tanh(raw / config.attn_logit_softcapping) * config.attn_logit_softcapping
    seen = scores > torch.finfo(scores.dtype).min / 2
    torch.testing.assert_close(scores[seen], capped[seen])


def test_text_prompts_are_refused_by_the_processor(loaded):
    """PaliGemma's processor encodes no prompt without an image: refused in vlreg's words
    before the model runs, saying to load for text; beside an image prompt in one batch,
    a text prompt runs (one processor call encodes them together)."""
    model = loaded("paligemma")
    with pytest.raises(ValueError, match=r"takes no prompt without an image: .*task='text-generation'"):
        with model.trace("caption en"):
            model.logits.save()
    with model.trace(["<image>caption en", "caption en"], images=[[image(56, 56)], []]):
        logits = model.logits.save()
    assert logits.shape[0] == 2


@pytest.mark.parametrize("name", ["paligemma", "paligemma2"])
def test_several_invokes_each_get_their_solo_runs_values(loaded, name):
    """Every PaliGemma prompt carries an image (the processor refuses one without), so
    the several-invokes suite's text-only case does not apply; two image prompts of
    different lengths each read what they read alone, at the right end of their row."""
    model = loaded(name)
    runs = [(chat(model, text=CAPTION), [PICTURE]),
            (chat(model, text="answer en what colour is the largest shape?"), [image(40, 70, seed=3)])]
    batched = []
    with torch.no_grad(), model.trace() as tracer:
        for prompt, images in runs:
            with tracer.invoke(prompt, images=images):
                batched.append((model.vision.image_features.save(), model.logits.save()))
    for (prompt, images), (features, logits) in zip(runs, batched):
        with torch.no_grad(), model.trace(prompt, images=images):
            alone_features, alone = model.vision.image_features.save(), model.logits.save()
        torch.testing.assert_close(features, alone_features, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(logits[:, -alone.shape[1]:], alone, atol=1e-4, rtol=1e-4)


def test_paligemmas_text_model_compares_on_its_text_load():
    """The text helpers that take text alone run on PaliGemma loaded for text (its image
    load refuses them: the processor takes no prompt without an image)."""
    text = load("paligemma", task=None)
    torch.testing.assert_close(analysis.compare_streams(text, text, "The quick brown fox"),
                               torch.ones(text.num_layers, dtype=torch.float64))
