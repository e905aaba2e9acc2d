"""What LFM2-VL promises beyond the conformance suite: its chat format and image expansion,
its hybrid blocks (a mixer kind the plugin declares, ``short_conv``, on the first blocks),
the short convolution's values against the module's own arithmetic, and the values refused
at a generation's later steps."""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis import attention_to_images
from vlreg.testing import chat
from vlreg.testing.conformance import at_each_step, image
from vlreg_lfm2_vl.checkpoints import TOKENS_PER_TILE
from vlreg_lfm2_vl.text import ShortConv

CHECKPOINT = "lfm2_vl"

PICTURE = image(112, 84)  # 2 x 2 tiles and a 3 x 4 thumbnail


def test_the_chat_format_and_the_image_expansion(model):
    prompt = chat(model)
    assert prompt == "<|startoftext|><|im_start|>user\n<image>What is in this image?<|im_end|>\n<|im_start|>assistant\n"
    ids = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    shown = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    inside = shown[shown.index("<|image_start|>") + 1 : shown.index("<|image_end|>")]
    tiles = [f"<|img_row_{r}_col_{c}|>" for r in (1, 2) for c in (1, 2)]
    assert inside == [token for marker in tiles for token in [marker] + ["<image>"] * TOKENS_PER_TILE] + [
        "<|img_thumbnail|>"] + ["<image>"] * 12
    assert shown[0] == "<|startoftext|>" and shown.count("<|startoftext|>") == 1  # the template's, not the tokenizer's


def test_each_block_holds_the_mixer_its_kind_says(model):
    """``short_conv`` on the convolution blocks (the first two), ``self_attn`` on the
    attention block; the native ``conv`` still names the mixer, and the convolution module
    inside it keeps its own name."""
    kinds = model._module.config.text_config.layer_types
    assert kinds == ["conv", "conv", "full_attention"]
    for block, kind in zip(model.layers, kinds):
        names = [type(mixer).__name__ for mixer in block.present_mixers()]
        assert names == (["ShortConv"] if kind == "conv" else ["Attention"])
        assert ("self_attn" in block.__dict__) == (kind == "full_attention")
    conv = model.layers[0].short_conv
    assert conv is model.layers[0].conv and isinstance(conv, ShortConv)
    assert isinstance(conv.conv._module, torch.nn.Conv1d) and "short_conv" not in conv.__dict__
    assert "short_conv/conv" in repr(model.layers[0])


def test_support_names_the_blocks_of_each_kind(model):
    rows = model.support()
    assert [row for row in rows if row.endswith("attention_output") and not row.startswith("vision")] == [
        "layers.0-1.short_conv.attention_output", "layers.2.self_attn.attention_output"]
    assert "layers.0-1.short_conv.conv_output" in rows and rows["layers.0-1.short_conv.conv_output"] is None


def test_the_sizes_are_the_attention_blocks_and_the_mlps(model):
    """The first block has no attention: the root's head sizes are the attention block's,
    the MLP width is ``w1``'s (``block_auto_adjust_ff_dim``), not the config's."""
    text = model._module.config.text_config
    attention = model.layers[2].self_attn
    assert (model.num_heads, model.num_kv_heads, model.head_dim) == (4, 2, 16) == (
        attention.num_heads, attention.num_kv_heads, attention.head_dim)
    assert model.intermediate_size == model.layers[0].mlp.w1.out_features == 96 != text.intermediate_size
    assert model.layers[0].short_conv.kernel_size == text.conv_L_cache == 3


def test_the_short_convolution_is_what_its_values_say(model):
    """``conv_input`` is ``B * x`` and ``gates`` is ``C`` of ``in_proj``'s split of the
    normed stream; ``conv_output`` is the causal depthwise convolution of ``conv_input``
    with the module's weights (computed here in float64, token by token); ``out_proj(gates
    * conv_output)`` is ``attention_output``."""
    rows = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model), images=[PICTURE]):
        for block in model.layers[:2]:
            conv = block.short_conv
            rows.append((block.operator_norm.output.save(), conv.gates.save(), conv.conv_input.save(),
                         conv.conv_output.save(), conv.attention_output.save()))
    for block, (normed, gates, taken, returned, output) in zip(model.layers[:2], rows):
        module = block.short_conv._module
        b, c, x = module.in_proj(normed).chunk(3, dim=-1)
        torch.testing.assert_close(gates, c)
        torch.testing.assert_close(taken, b * x)
        weight = module.conv.weight.detach().double()[:, 0]  # [hidden, kernel]
        kernel = weight.shape[-1]
        padded = torch.nn.functional.pad(taken.double(), (0, 0, kernel - 1, 0))
        expected = sum(padded[:, k : k + taken.shape[1]] * weight[:, k] for k in range(kernel))
        torch.testing.assert_close(returned.double(), expected)
        torch.testing.assert_close(module.out_proj(gates * returned), output)


def test_zeroing_the_convolution_output_leaves_only_the_mlp(model):
    """A write to ``conv_output`` reaches the mixer's output: zeroed, the mixer adds
    nothing (``out_proj`` has no bias)."""
    with model.trace(chat(model), images=[PICTURE]):
        model.layers[1].short_conv.conv_output[:] = 0
        added = model.layers[1].short_conv.attention_output.save()
    assert added.abs().max() == 0


def test_the_convolution_values_are_the_prefills(model):
    """At a later generation step the convolution runs its cached update: where that is
    another call (transformers 5.23, 5.24) ``conv_output`` is refused there, naming the way
    out (on 5.25 one call runs at every step, and serves it); ``gates`` and ``attention_output`` are served at
    every step, and without a cache the convolution runs over the whole sequence again."""
    prompt = chat(model, images=0)
    added, gates, outputs = [], [], []  # made before the traces: names first bound inside one do not leave it
    with model.generate(prompt, max_new_tokens=2, min_new_tokens=2) as tracer:
        for step in tracer.iter[0:2]:
            gates.append(model.layers[0].short_conv.gates.save())
            added.append(model.layers[0].short_conv.attention_output.save())
    assert added[0].shape[1] > 1 and added[1].shape[1] == gates[1].shape[1] == 1
    def convolved(model):
        return model.layers[0].short_conv.conv_output

    if model.layers[0].short_conv.one_call:  # transformers 5.25: one call at every step, served there
        outputs = at_each_step(model, prompt, convolved)
        assert outputs[0].shape[1] == added[0].shape[1] and outputs[1].shape[1] == 1
        return
    with pytest.raises(Unavailable, match=r"conv_output is unavailable: at step 1, after the prefill"):
        at_each_step(model, prompt, convolved, outputs)
    assert len(outputs) == 1
    outputs = at_each_step(model, prompt, convolved, use_cache=False)
    assert outputs[1].shape[1] == outputs[0].shape[1] + 1


def test_attention_to_images_names_the_blocks_that_convolve(model):
    with pytest.raises(Unavailable, match=r"layers \[0, 1\]: those blocks have no self_attn \(they mix tokens by "
                                          r"short_conv, or hold only an MLP\); the blocks that attend are \[2\]"):
        attention_to_images(model, chat(model), [PICTURE], layers=[0, 1, 2])
    found = attention_to_images(model, chat(model), [PICTURE])
    assert list(found.layers) == [2]


def test_two_invokes_with_different_crops_each_get_their_own_image(model):
    """One invoke's image is a single crop, the other's five: each invoke's features are
    what it gets alone."""
    small = image(40, 40, seed=1)
    alone = {}
    for name, picture in (("small", small), ("large", PICTURE)):
        with model.trace(chat(model), images=[picture]):
            alone[name] = model.vision.image_features.save()
    with model.trace() as tracer:
        with tracer.invoke(chat(model), images=[small]):
            first = model.vision.image_features.save()
        with tracer.invoke(chat(model, text="Describe the picture, please."), images=[PICTURE]):
            second = model.vision.image_features.save()
    torch.testing.assert_close(first, alone["small"])
    torch.testing.assert_close(second, alone["large"])
