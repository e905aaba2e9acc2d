"""What is particular to Gemma 3, beyond the conformance suite."""

import pytest
import torch

import vlreg_gemma3
import vlreg_llava
from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def model():
    return StandardizedTransformer(
        str(build("gemma3")), task="image-text-to-text", dispatch=True, device="cpu", attn_implementation="eager"
    )


def prompt(model, *content, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": list(content)})
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def text(words):
    return {"type": "text", "text": words}


def test_the_tower_is_served_by_the_llava_plugin(model):
    assert model.family.name == "gemma3"
    assert model.family.plugins == {"wrapper": vlreg_gemma3, "text": vlreg_gemma3, "vision": vlreg_llava}


def test_the_chat_template_writes_gemma3_turns(model):
    rendered = prompt(model, {"type": "image"}, text("Describe it."), system="Be brief.")
    assert rendered == (
        "<bos><start_of_turn>user\nBe brief.\n\n<start_of_image>Describe it.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_sublayer_outputs_are_read_after_their_post_norms(model):
    block = model.layers[0]
    with model.trace(prompt(model, text("The quick brown fox."))):
        attention = block.self_attn.output[0].save()
        added = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
    torch.testing.assert_close(block.post_attention_layernorm._module(attention), added)
    torch.testing.assert_close(block.post_feedforward_layernorm._module(mlp), mlp_added)
    assert not torch.allclose(attention, added)


def test_zeroing_the_attention_contribution_leaves_input_plus_mlp(model):
    block = model.layers[1]
    with model.trace(prompt(model, text("The quick brown fox."))):
        x = block.input.save()
        block.self_attn.attention_output[:] = 0
        mlp = block.mlp.mlp_output.save()
        out = block.layer_output.save()
    torch.testing.assert_close(x + mlp, out)


def test_scores_are_scaled_by_query_pre_attn_scalar(model):
    config = model._module.config.text_config
    assert config.query_pre_attn_scalar != config.head_dim
    block = model.layers[-1]
    with model.trace(prompt(model, text("The quick brown fox."))):
        queries = block.self_attn.attention_queries.save()
        keys = block.self_attn.attention_keys.save()
        scores = block.self_attn.attention_scores.save()
    keys = keys.repeat_interleave(model.num_heads // model.num_kv_heads, dim=1)
    expected = queries @ keys.transpose(-1, -2) * config.query_pre_attn_scalar**-0.5
    torch.testing.assert_close(scores.tril(), expected.tril())


def test_sliding_blocks_attend_within_their_window(model):
    config = model._module.config.text_config
    assert config.layer_types == ["sliding_attention", "full_attention"]
    window = config.sliding_window
    patterns = []
    with model.trace(prompt(model, text("The Eiffel Tower is in Paris. The capital of France is Paris."))):
        for block in model.layers:
            patterns.append(block.self_attn.attention_probabilities.save())
    sliding, full = patterns
    assert sliding.shape[-1] > window
    assert sliding.tril(-window).abs().max() == 0
    assert full.tril(-window).abs().max() > 0


def test_an_image_is_pooled_and_its_tokens_see_each_other(model):
    tower = model.vision
    per_side = tower.image_size // tower.patch_size
    with model.trace(prompt(model, {"type": "image"}, text("What is this?")), images=[image(90, 60)]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        pattern = model.layers[-1].self_attn.attention_probabilities.save()
    assert patches.shape[1] == per_side**2
    assert features.shape[0] == model._module.config.mm_tokens_per_image == int(mask.sum())
    positions = mask[0].nonzero().flatten()
    among_images = pattern[0][:, positions][:, :, positions]
    assert among_images.triu(1).abs().max() > 0, "an image token attends only to earlier ones"
