"""LFM3's text model (``lfm3``): LFM2's hybrid blocks with each sublayer's output normed.

A block holds attention (``self_attn``) or LFM2's short convolution (``conv``, served as
``short_conv``), ``operator_norm`` before it and ``post_operator_norm`` after it, then the
MLP (``feed_forward``, served as ``mlp``) between ``ffn_norm`` and ``post_ffn_norm``: so what
a sublayer adds to the stream is its post-norm's output (``nn.Identity`` where the config
turns ``use_sandwich_norm`` off), and ``input + attention_output + mlp_output ==
layer_output`` on every block, whichever mixer it holds.

The attention is Qwen3's (``q_norm``/``k_norm`` per head, ``o_proj``) with a sigmoid gate per
head (``g_proj`` of the block's normed input, where ``use_attention_gate``): its head outputs
are read where ``o_proj`` receives them, after the gate (vlreg-qwen3-vl's adapter
``"gated_attention"``), so ``o_proj(attention_head_outputs)`` is what the post-norm takes.
Blocks are ``full_attention``, ``sliding_attention`` or ``conv`` by ``config.layer_types``.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Mlp, adapter, returned

from .text import Lfm2Layer, ShortConv


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class Lfm3Attention(adapter("gated_attention")):
    """LFM3's head-gated attention; what it adds is ``post_operator_norm``'s output."""

    attention_output = returned(_after("post_operator_norm"), description="what the attention adds to the stream, "
                                                                           "post_operator_norm of its output")


class Lfm3ShortConv(ShortConv):
    """LFM2's short convolution; what it adds is ``post_operator_norm``'s output."""

    attention_output = returned(_after("post_operator_norm"), description="what the mixer adds to the stream, "
                                                                          "post_operator_norm of its output")


class Lfm3Mlp(Mlp):
    """LFM3's SwiGLU (``w1``, ``w3``, ``w2``); what it adds is ``post_ffn_norm``'s output."""

    _widening = ("w1",)
    mlp_output = returned(_after("post_ffn_norm"), description="what the MLP adds to the stream, post_ffn_norm "
                                                               "of its output")


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.lfm3 import modeling_lfm3 as lfm3

    return {lfm3.Lfm3DecoderLayer: Lfm2Layer, lfm3.Lfm3Attention: Lfm3Attention, lfm3.Lfm3ShortConv: Lfm3ShortConv,
            lfm3.Lfm3MLP: Lfm3Mlp}
