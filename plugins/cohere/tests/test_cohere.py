"""What Aya Vision and Command A Vision promise beyond the conformance suite: their chat
formats and image expansions, the parts they reuse, Cohere2's parallel blocks and its
rope on sliding-window blocks only, what each projector reads, and several invokes whose
images are cut into different numbers of crops."""

from __future__ import annotations

import pytest
import torch

from vlreg import ReadOnly
from vlreg.core.host import plugins
from vlreg.testing import chat
from vlreg.testing.conformance import image
from vlreg_cohere import plugin
from vlreg_cohere.checkpoints import TOKENS_PER_TILE, WINDOW


PICTURE = image(112, 84)  # 2 x 2 tiles and the thumbnail: 5 crops of 16 tokens
CHECKPOINTS = ("aya_vision", "cohere2_vision")


def tokens(model, prompt: str, images: list) -> list[str]:
    ids = model.processor(text=prompt, images=images, return_tensors="pt")["input_ids"][0]
    return model.tokenizer.convert_ids_to_tokens(ids.tolist())


def test_the_chat_format_and_the_image_expansion(model):
    prompt = chat(model)
    placeholder = "<image>" if model.family.parts["wrapper"].model_type == "aya_vision" else "<|IMG_PATCH|>"
    assert prompt == (f"<BOS_TOKEN><|START_OF_TURN_TOKEN|><|USER_TOKEN|>{placeholder}What is in this image?"
                      "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
    shown = tokens(model, prompt, [PICTURE])
    start, end = shown.index("<|START_OF_IMG|>"), shown.index("<|END_OF_IMG|>")
    inside = shown[start + 1 : end]
    patches = ["<|IMG_PATCH|>"] * TOKENS_PER_TILE
    if placeholder == "<image>":  # Aya: each crop named by a text before its tokens, the thumbnail last
        text = model.tokenizer.convert_tokens_to_string(inside).replace("<|IMG_PATCH|>", "|")
        assert text == "TILE_1" + "|" * 16 + "TILE_2" + "|" * 16 + "TILE_3" + "|" * 16 + "TILE_4" + "|" * 16 + "TILE_GLOBAL" + "|" * 16
    else:  # Command A: one line break after each crop's tokens
        assert inside == (patches + ["<|IMG_LINE_BREAK|>"]) * 5


def test_the_parts_and_who_serves_them(model):
    assert model.family.name == "cohere"
    assert model.family.parts["text"].model_type == "cohere2"
    assert model.family.plugins["text"] is plugin
    assert model.family.parts["vision"].model_type == "siglip_vision_model"
    assert plugins.distribution(model.family.plugins["vision"]).name == "vlreg-llava"  # SigLIP reused by claim, nothing imported
    assert "post_attention_layernorm" not in model.layers[0]._module._modules


def test_a_block_is_parallel_its_attention_and_mlp_read_the_same_norm(model):
    block = model.layers[0]
    with model.trace(chat(model), images=[PICTURE]):
        stream = block.input.save()
        normed = block.input_layernorm.output.save()
        attended = block.self_attn.inputs.save()
        added = block.self_attn.attention_output.save()
        mlp_input = block.mlp.input.save()
        mlp_added = block.mlp.mlp_output.save()
        out = block.layer_output.save()
    assert torch.equal(attended[1]["hidden_states"], normed) and torch.equal(mlp_input, normed)
    assert not torch.equal(mlp_input, block.input_layernorm._module(stream + added))  # not a sequential block
    torch.testing.assert_close(stream + added + mlp_added, out)


def test_rope_on_the_sliding_window_block_only(model):
    """Block 0 slides (its queries are rotated: position 0's not, later ones' pairs keep
    their norms); block 1 attends to everything with no position encoding (its queries
    are the projections)."""
    assert model._module.config.text_config.layer_types == ["sliding_attention", "full_attention"]
    rows = []
    with model.trace(chat(model), images=[PICTURE]):
        for block in model.layers:
            attention = block.self_attn
            rows.append((attention.q_proj.output.save(), attention.attention_queries.save(),
                         attention.attention_probabilities.save()))
    (projected, rotated, sliding), (plain, unrotated, full) = rows
    heads, dim = rotated.shape[1], rotated.shape[-1]
    as_heads = lambda x: x.view(*x.shape[:2], heads, dim).transpose(1, 2)
    torch.testing.assert_close(unrotated, as_heads(plain))
    assert not torch.allclose(rotated[:, :, 1:], as_heads(projected)[:, :, 1:])
    torch.testing.assert_close(rotated[:, :, 0], as_heads(projected)[:, :, 0])
    pairs = lambda x: x.unflatten(-1, (dim // 2, 2)).norm(dim=-1)  # Cohere's rope turns interleaved pairs
    torch.testing.assert_close(pairs(rotated), pairs(as_heads(projected)), rtol=1e-4, atol=1e-5)
    seq = sliding.shape[-1]
    assert seq > WINDOW
    far = torch.ones(seq, seq, dtype=torch.bool).tril(-WINDOW)  # keys at least a window back
    assert sliding[..., far].abs().max() == 0 and full[..., far].abs().max() > 0


def test_what_the_projector_reads(model):
    """Aya's projector reads the last block's stream before SigLIP's final norm (so the
    tower's output refuses a write); Command A's reads the tower's output."""
    aya = model.family.parts["wrapper"].model_type == "aya_vision"
    with model.trace(chat(model), images=[PICTURE]):
        last = model.vision.layers[-1].layer_output.save()
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
    assert torch.equal(fed, last if aya else tower) and not torch.equal(last, tower)
    if aya:
        with pytest.raises(ReadOnly, match=r"edit vision.layers\[1\].layer_output"):
            with model.trace(chat(model), images=[PICTURE]):
                model.vision.tower_output[:] = 0
    else:
        assert "vision.tower_output" not in model.read_only()


def test_the_crops_fill_the_image_tokens_in_order(model):
    with model.trace(chat(model), images=[PICTURE]):
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    (geometry,) = model.vision.geometry(chat(model), [PICTURE])
    assert [g.label for g in geometry.grids] == ["tile 0,0", "tile 0,1", "tile 1,0", "tile 1,1", "thumbnail"]
    for crop in range(len(geometry.grids)):
        assert torch.equal(features[geometry.span(crop)], projected[crop].reshape(-1, model.hidden_size))
    # within a crop the tokens are consecutive; between crops stands the text the processor writes there
    shown, cohere = tokens(model, chat(model), [PICTURE]), model.family.parts["wrapper"].model_type == "cohere2_vision"
    for crop in range(5):
        span = geometry.positions[geometry.span(crop)]
        assert torch.equal(span, torch.arange(int(span[0]), int(span[0]) + TOKENS_PER_TILE))
        if crop:
            between = model.tokenizer.convert_tokens_to_string(shown[int(geometry.positions[geometry.span(crop).start - 1]) + 1 : int(span[0])])
            assert between == ("<|IMG_LINE_BREAK|>" if cohere else ("TILE_GLOBAL" if crop == 4 else f"TILE_{crop + 1}"))


def test_two_invokes_with_different_crops_each_get_their_own_image(model):
    """One invoke's image is a single crop, the other's five: each invoke's features and
    logits are what it gets alone, and an edit of one's features leaves the other's."""
    small, large = image(40, 40, seed=1), PICTURE
    alone = {}
    for name, picture in (("small", small), ("large", large)):
        with model.trace(chat(model), images=[picture]):
            alone[name] = (model.vision.image_features.save(), model.logits.save())
    with model.trace() as tracer:
        with tracer.invoke(chat(model), images=[small]):
            first = model.vision.image_features.clone().save()  # before the edit below
            model.vision.image_features[:] = 0
        with tracer.invoke(chat(model, text="What is in this image? Describe the picture."), images=[large]):
            second = model.vision.image_features.save()
            logits = model.logits.save()
    assert first.shape[0] == TOKENS_PER_TILE and second.shape[0] == 5 * TOKENS_PER_TILE
    torch.testing.assert_close(first, alone["small"][0])
    torch.testing.assert_close(second, alone["large"][0])
    with model.trace(chat(model, text="What is in this image? Describe the picture."), images=[large]):
        expected = model.logits.save()
    torch.testing.assert_close(logits[:, -expected.shape[1]:], expected)
