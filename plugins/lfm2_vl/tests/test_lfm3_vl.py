"""What LFM3-VL promises beyond the conformance suite (`test_lfm3_conformance.TestLfm3Vl`):

* each image's geometry counts the image tokens at the mask's positions, its grid the merge
  blocks the processor's ``image_grid_thw`` gives;
* both the text model and the tower are hybrids, each block's mixer under its kind's name;
* the tower's short convolution: what it adds is ``out_proj`` of the output gate times
  ``conv_output``, and an edit of ``conv_output`` reaches it;
* the text blocks add each sublayer's normed output, and the attention's head outputs are
  read after the gate, where ``o_proj`` takes them.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image
from vlreg_lfm2_vl.vision import VisionShortConv
from vlreg_lfm2_vl.text import Lfm3Attention, Lfm3ShortConv

CHECKPOINT = "lfm3_vl"
PICTURES = (image(112, 84), image(84, 140, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_each_block_holds_the_mixer_its_kind_says(model):
    text = model._module.config.text_config.layer_types
    tower = model._module.config.vision_config.layer_types
    assert (text, tower) == (["conv", "sliding_attention", "full_attention"], ["conv", "full_attention"])
    for blocks, kinds, conv, attention in ((model.layers, text, Lfm3ShortConv, Lfm3Attention),
                                           (model.vision.layers, tower, VisionShortConv, None)):
        for block, kind in zip(blocks, kinds):
            (mixer,) = block.present_mixers()
            assert isinstance(mixer, conv) == (kind == "conv") == ("short_conv" in block.__dict__)
            assert attention is None or isinstance(mixer, attention) == (kind != "conv")
    assert model.vision.layers[0].short_conv is model.vision.layers[0].conv
    assert model.vision.layers[0].short_conv.kernel_size == 3


def test_the_towers_convolution_adds_its_gated_output(model):
    block = model.vision.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        normed = block.operator_norm.output.save()
        conv = block.short_conv.conv_output.save()
        added = block.short_conv.attention_output.save()
    module = block.short_conv._module
    _, gate, _ = module.in_proj(normed).chunk(3, dim=-1)
    torch.testing.assert_close(added, module.out_proj(gate * conv[0]).unsqueeze(0))
    with model.trace(chat(model), images=[PICTURES[0]]):
        block.short_conv.conv_output[:] = 0
        zeroed = block.short_conv.attention_output.save()
    assert zeroed.abs().max() == 0  # out_proj has no bias


def test_the_text_sublayers_add_their_normed_outputs_and_heads_are_read_after_the_gate(model):
    block = model.layers[1]
    with model.trace(chat(model), images=[PICTURES[0]]):
        heads = block.self_attn.attention_head_outputs.save()
        raw = block.self_attn.output[0].save()
        added = block.self_attn.attention_output.save()
        mlp_raw = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
    assert heads.shape[-2:] == (model.num_heads, model.head_dim)
    torch.testing.assert_close(block.self_attn.o_proj._module(heads.flatten(-2)), raw)
    torch.testing.assert_close(added, block.post_operator_norm._module(raw), rtol=0, atol=0)
    torch.testing.assert_close(mlp_added, block.post_ffn_norm._module(mlp_raw), rtol=0, atol=0)
