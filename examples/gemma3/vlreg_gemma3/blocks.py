"""Gemma 3's text blocks: sandwich norms around both sublayers.

A Gemma 3 block norms what each sublayer returns before adding it to the stream::

    h = x + post_attention_layernorm(self_attn(input_layernorm(x)))
    y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))

vlreg's ``attention_output`` and ``mlp_output`` are what a sublayer adds to the
stream, so here they are the post-norms' outputs, not the sublayers' own (which stay
``self_attn.output`` and ``mlp.output``). That keeps ``input + attention_output +
mlp_output == layer_output`` on these blocks as on a plain pre-norm block, and an
edit of either lands exactly in the stream.

The attention interior needs nothing particular: Gemma3Attention calls transformers'
attention interface once, with queries and keys after ``q_norm``/``k_norm`` and the
rotary embedding, its own scaling (``query_pre_attn_scalar ** -0.5``) and, on a
sliding-window block, a mask that is already banded, so the standard values read
there are the scaled, masked scores and the pattern the block really uses.
"""

from __future__ import annotations

from vlreg.plugin import Attention, Layer, Mlp, returned


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class SandwichAttention(Attention):
    """Gemma 3 attention; what it adds to the stream is the post-attention norm's output."""

    attention_output = returned(_after("post_attention_layernorm"))


class SandwichMlp(Mlp):
    """Gemma 3 MLP; what it adds to the stream is the post-feedforward norm's output."""

    mlp_output = returned(_after("post_feedforward_layernorm"))


def text_envoys() -> dict[type, type]:
    from transformers.models.gemma3 import modeling_gemma3 as gemma3

    return {
        gemma3.Gemma3DecoderLayer: Layer,
        gemma3.Gemma3Attention: SandwichAttention,
        gemma3.Gemma3MLP: SandwichMlp,
    }
