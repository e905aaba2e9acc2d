"""What is particular to Mllama beyond the cross-attention suite: generation through the
cross-attention cache, several invokes, and which text rows the blocks' MLPs reach; and
`vlreg new-plugin` on Mllama: the survey finds no scatter but the text model's
``cross_attention_states``, and maps the cross-attention blocks; a small copy keeps a
cross-attention block and a tower whose output fits its projector."""

from __future__ import annotations

import pytest
import torch
from transformers import MllamaConfig

from vlreg import ReadOnly, StandardizedTransformer, Unavailable
from vlreg.template.survey import survey
from vlreg.testing import build, shrink, small_copy
from vlreg.testing.conformance import image

CHECKPOINT = "mllama"


def prompt(model) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def test_an_edit_at_the_first_step_reaches_every_later_step_through_the_cache(model):
    """The states reach the text model at the first step only; the cross-attention blocks
    cache their keys and values, so an edit there is what every later step attends to."""
    picture, last = image(112, 84), model.layers[model.cross_attention_layers[-1]]
    plain, keys, edited = [], [], []  # made outside the traces
    with model.generate(prompt(model), images=[picture], max_new_tokens=3, min_new_tokens=3) as tracer:
        for step in tracer.iter[0:3]:
            plain.append(model.logits[:, -1].save())
    with model.generate(prompt(model), images=[picture], max_new_tokens=3, min_new_tokens=3) as tracer:
        model.vision.image_features = torch.linspace(-1, 1, 20 * model.hidden_size).reshape(1, 20, -1)
        states = model.vision.image_features.save()
        for step in tracer.iter[0:3]:
            keys.append(last.cross_attn.attention_keys.save())
            edited.append(model.logits[:, -1].save())
    expected, _ = last.cross_attn.project(states)
    for step in range(3):
        torch.testing.assert_close(keys[step], expected)
        assert not torch.equal(plain[step], edited[step]), step
    with pytest.raises(Unavailable, match="generation step after the first"):
        with model.generate(prompt(model), images=[picture], max_new_tokens=2, min_new_tokens=2) as tracer:
            for step in tracer.iter[0:2]:
                model.vision.image_features.save()


def test_each_invoke_reads_and_edits_its_own_rows_of_the_states(model):
    first, second = image(112, 84), image(28, 28, 1)
    with model.trace() as tracer:
        with tracer.invoke(prompt(model), images=[first]):
            mine = model.vision.image_features.save()
        with tracer.invoke(prompt(model), images=[second]):
            model.vision.image_features[:] = 0
            keys = model.layers[1].cross_attn.attention_keys.save()
            logits = model.logits.save()
    with model.trace(prompt(model), images=[first]):
        alone = model.vision.image_features.save()
    with model.trace(prompt(model), images=[second]):
        model.vision.image_features[:] = 0
        keys_alone = model.layers[1].cross_attn.attention_keys.save()
        logits_alone = model.logits.save()
    assert mine.shape == alone.shape == (1, 20, model.hidden_size)
    torch.testing.assert_close(mine, alone)
    torch.testing.assert_close(keys, keys_alone)
    torch.testing.assert_close(logits, logits_alone)


def test_the_mlps_reach_only_the_text_after_the_image(model):
    """The processor lets a token see the image from its placeholder on; a block's MLP
    output reaches the stream only there, and the mask the blocks share refuses edits."""
    with model.trace(prompt(model), images=[image(112, 84)]):
        placeholder = model.vision.image_token_mask.save()
        rows = model.layers[1].text_row_mask.save()
        same = model.layers[3].text_row_mask.save()
    assert torch.equal(rows, (placeholder.cumsum(-1) > 0).to(rows.dtype))
    assert torch.equal(rows, same) and 0 < int(rows.sum()) < rows.shape[-1]
    with pytest.raises(ReadOnly, match="every cross-attention block"):
        with model.trace(prompt(model), images=[image(112, 84)]):
            model.layers[1].text_row_mask[:] = 1


def test_helpers_over_the_images_tokens_refuse_naming_what_to_edit(model):
    """The analysis helpers that edit or read the image's tokens in the stream have none to
    work on here: they refuse before running, rather than edit the wrong rows."""
    from vlreg import analysis

    picture = image(112, 84)
    helpers = {
        "ablate_image": lambda: analysis.ablate_image(model, prompt(model), [picture]),
        "occlusion": lambda: analysis.occlusion(model, prompt(model), [picture]),
        "patch_image": lambda: analysis.patch_image(model, prompt(model), [picture], [image(112, 84, 1)]),
        "logit_lens": lambda: analysis.logit_lens(model, prompt(model), [picture]),
        "attention_to_images": lambda: analysis.attention_to_images(model, prompt(model), [picture]),
        "tower_patterns": lambda: analysis.tower_patterns(model, prompt(model), [picture]),
    }
    for name, call in helpers.items():
        with pytest.raises(Unavailable, match=f"{name} is unavailable: .*cross-attention.*image_features"):
            call()
    (geometry,) = model.vision.geometry(prompt(model), [picture])
    with pytest.raises(Unavailable, match="cross-attention"):
        with model.trace(prompt(model), images=[picture]):
            analysis.steer(model, [0], torch.ones(model.hidden_size), positions=geometry)
    with model.trace(prompt(model), images=[picture]):
        plain = model.logits.save()
    with model.trace(prompt(model), images=[picture]):  # what they name instead
        model.vision.image_features[geometry.row, geometry.features] = 0
        ablated = model.logits.save()
    assert not torch.equal(plain, ablated)


def test_prompts_without_an_image_are_refused_beside_prompts_with_one(model):
    """Once a row carries images the text model runs the cross-attention blocks for every
    row, so a text prompt batched with an image prompt would not run as it does alone."""
    text = "<|begin_of_text|>The quick brown fox"
    with pytest.raises(ValueError, match="attend to the others' padding"):
        with model.trace() as tracer:
            with tracer.invoke(prompt(model), images=[image(112, 84)]):
                model.logits.save()
            with tracer.invoke(text):
                model.logits.save()
    with pytest.raises(ValueError, match="apart from those with images"):
        with model.trace([prompt(model), text], images=[[image(112, 84)], []]):
            model.logits.save()
    with model.trace() as tracer:  # text prompts together are fine
        with tracer.invoke(text):
            first = model.logits.save()
        with tracer.invoke(text):
            second = model.logits.save()
    torch.testing.assert_close(first, second)


def test_a_bfloat16_load_serves_the_states_and_the_cross_attention(model):
    half = StandardizedTransformer(str(build("mllama")), task="image-text-to-text", dispatch=True,
                                   attn_implementation="eager", device="cpu", dtype=torch.bfloat16)
    last = half.layers[half.cross_attention_layers[-1]]
    with half.trace(prompt(half), images=[image(112, 84)]):
        half.vision.image_features[:] = 0.5
        states = half.vision.image_features.save()
        keys = last.cross_attn.attention_keys.save()
        pattern = last.cross_attn.attention_probabilities.save()
    assert states.dtype == keys.dtype == torch.bfloat16
    torch.testing.assert_close(keys, last.cross_attn.project(states)[0])
    torch.testing.assert_close(pattern.sum(-1).float(), torch.ones(pattern.shape[:-1]), atol=1e-2, rtol=0)


def test_the_survey_declares_cross_attention(tmp_path):
    MllamaConfig().save_pretrained(tmp_path)
    found = survey(tmp_path)
    assert found.scatter is None and found.cross == ("model.language_model", "cross_attention_states")
    assert {cls.__name__: standard for cls, standard in found.text_envoys.items()} == {
        "MllamaSelfAttentionDecoderLayer": "Layer", "MllamaTextSelfAttention": "Attention", "MllamaTextMLP": "Mlp",
        "MllamaCrossAttentionDecoderLayer": "CrossAttentionLayer", "MllamaTextCrossAttention": "CrossAttentionMixer"}
    assert not any(line.startswith("no call in the forward") for line in found.notes["wrapper"])


def test_a_cut_keeps_a_cross_attention_block_and_the_towers_output_width():
    config = shrink(MllamaConfig())
    text, vision = config.text_config, config.vision_config
    assert (text.num_hidden_layers, text.cross_attention_layers) == (2, [1])
    assert (vision.num_hidden_layers, vision.num_global_layers, vision.intermediate_layers_indices) == (2, 1, [1])
    assert vision.vision_output_dim == vision.hidden_size * 2


def test_a_small_copy_reads_the_image_in_its_cross_attention_block(tmp_path):
    path = small_copy(build("mllama"), tmp_path / "copy")
    model = StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu")
    assert model.cross_attention_layers == [1]
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[image(112, 84)]):
        states = model.vision.image_features.save()
        keys = model.layers[1].cross_attn.attention_keys.save()
    assert states.shape == (1, 20, model.hidden_size)
    torch.testing.assert_close(keys, model.layers[1].cross_attn.project(states)[0])
