"""LFM2's hybrid text model: each block mixes tokens by attention or by a short convolution.

``config.layer_types`` says which, block by block (``full_attention`` or ``conv``; the
published checkpoints start with convolution blocks, LFM2-1.2B's attention blocks are 2, 5,
8, 10, 12 and 14 of 16). A block holds its mixer (``self_attn``, or ``conv`` served as
``short_conv``), ``operator_norm`` before it, ``feed_forward`` (served as ``mlp``) and
``ffn_norm`` before that: pre-norm, so ``input + (self_attn or short_conv).attention_output
+ mlp.mlp_output == layer_output`` on every block.

The short convolution (`ShortConv`) is double-gated: ``in_proj`` makes three rows per token,
``B``, ``C`` and ``x``; the causal depthwise convolution (``kernel_size`` taps, each channel
its own) runs over ``B * x``, and ``C`` gates what it returns before ``out_proj``:

    attention_output = out_proj(C * conv(B * x))

The attention norms its queries and keys per head (``q_layernorm``, ``k_layernorm``) before
the rotary embedding, and projects its heads back with ``out_proj``. The MLP is a SwiGLU of
``w1``, ``w3`` and ``w2``, whose width is not the config's ``intermediate_size`` where
``block_auto_adjust_ff_dim`` is set (two thirds of it, rounded up to ``block_multiple_of``):
`Lfm2Mlp` reads it off ``w1``.

LFM3's text model (``lfm3``): LFM2's hybrid blocks with each sublayer's output normed.

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

import sys
from typing import Any, ClassVar

from vlreg.plugin import (Attention, Gate, Layer, Mixer, Mlp, Standard, adapter, modeling_envoys, prefill_only, returned,
                          value)

#: The norms keep their names (``operator_norm``, ``ffn_norm``): SigLIP's blocks, in the same model, are
#: the ones served as ``input_layernorm`` and ``post_attention_layernorm``.
RENAME = {"feed_forward": "mlp"}


class Lfm2Layer(Layer):
    """An LFM2 block: attention (``self_attn``) or the short convolution (``short_conv``),
    then the MLP."""

    mixers = (Mixer("self_attn"), Mixer("short_conv", native="conv"))


def _call(mixer: Any) -> str:
    return f"{mixer.path}.source.{mixer.convolution_call}"


_LATER_STEPS = prefill_only("the convolution's cached update", "the call", "the convolution")
#: The prefill's values, refused at a cached generation's later steps where the forward calls
#: the convolution only at the prefill (5.23, 5.24); not where it calls it at every step (5.25).
PREFILL = Gate(lambda asked: None if asked.envoy.one_call else _LATER_STEPS(asked))


def _columns(tensor: Any) -> Any:
    """``[batch, channels, seq]`` as ``[batch, seq, channels]`` (a view)."""
    return tensor.transpose(1, 2)


class ShortConv(Standard):
    """LFM2's gated short convolution (``short_conv``), read where its torch path computes
    it, every value ``[batch, seq, hidden_size]`` (views of the module's ``[batch, hidden,
    seq]``, so in-place edits land):

    * ``gates``: ``C``, which multiplies the convolution's output, token by token and
      channel by channel (a copy of ``in_proj``'s split, written back);
    * ``conv_input``: ``B * x``, what the convolution takes (at the prefill of a cached run,
      left-padded with zeros to ``kernel_size`` tokens where the prompt is shorter, on 5.23 and 5.24);
    * ``conv_output``: what the convolution returns, token ``t`` a weighted sum of
      ``conv_input`` at tokens ``t - kernel_size + 1`` to ``t`` per channel;
    * ``attention_output``: what the mixer adds to the stream (the name every mixer shares).

    transformers 5.23 and 5.24 call the convolution (``causal_conv1d_fn``) in the module's
    forward at the prefill, and a generation's later steps run each token through its
    cached update, another call: there ``conv_input`` and ``conv_output`` are the
    prefill's, refused at later steps unless the generation runs without a cache
    (``use_cache=False``). transformers 5.25 calls ``causal_conv1d_forward`` at every step
    (the cache's update, then the convolution or its one-token update inside), and they are
    read at that call, at every step (`one_call`).
    """

    sourced = True
    #: nnsight's name for the split of ``in_proj``'s output in the module's forward.
    split_call: ClassVar[str] = "BCx_chunk_0"
    order = ("gates", "conv_input", "conv_output", "attention_output")
    refuses = dict.fromkeys(("conv_input", "conv_output"), PREFILL)

    @property
    def one_call(self) -> bool:
        """Whether the forward runs the convolution through transformers 5.25's
        ``causal_conv1d_forward`` (which takes the module first, then ``B * x``)."""
        return hasattr(sys.modules[type(self._module).__module__], "causal_conv1d_forward")

    @property
    def convolution_call(self) -> str:
        """nnsight's name for the call to the causal convolution in the module's forward."""
        return "causal_conv1d_forward_0" if self.one_call else "causal_conv1d_fn_0"

    gates = value(
        lambda m: f"{m.path}.source.{m.split_call}.output",
        description="C, which multiplies the convolution's output, [batch, seq, hidden]",
    )(lambda m, raw: _columns(raw[1]).clone()).writes(
        lambda m, raw, new: (raw[0], _columns(new).reshape(raw[1].shape), *raw[2:])
    ).transform(lambda m, view, raw: (raw[0], _columns(view), *raw[2:]))
    conv_input = value(
        lambda m: f"{_call(m)}.input", description="B * x, what the convolution takes, [batch, seq, hidden]"
    )(lambda m, raw: _columns(raw[0][int(m.one_call)])).writes(
        lambda m, raw, new: ((*raw[0][:int(m.one_call)], _columns(new).reshape(raw[0][int(m.one_call)].shape),
                              *raw[0][int(m.one_call) + 1:]), raw[1])
    )
    conv_output = value(
        lambda m: f"{_call(m)}.output", description="what the causal convolution returns, [batch, seq, hidden]"
    )(lambda m, raw: _columns(raw)).writes(lambda m, raw, new: _columns(new).reshape(raw.shape))
    attention_output = returned(description="what the mixer adds to the stream")

    @property
    def kernel_size(self) -> int:
        """How many tokens the convolution reads, the current one among them."""
        return int(self._module.conv_kernel_size)


class Lfm2Mlp(Mlp):
    """LFM2's SwiGLU; its width is ``w1``'s (`block_auto_adjust_ff_dim` changes it)."""

    _widening = ("w1",)


envoys = modeling_envoys("lfm2", {"Lfm2DecoderLayer": Lfm2Layer, "Lfm2Attention": Attention, "Lfm2ShortConv": ShortConv,
                                  "Lfm2MLP": Lfm2Mlp})


# -- LFM3 (``lfm3``) ------------------------------------------------------------

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


def lfm3_envoys(part: Any) -> dict[type, type]:
    """LFM3's classes onto its envoys."""
    from transformers.models.lfm3 import modeling_lfm3 as lfm3

    return {lfm3.Lfm3DecoderLayer: Lfm2Layer, lfm3.Lfm3Attention: Lfm3Attention, lfm3.Lfm3ShortConv: Lfm3ShortConv,
            lfm3.Lfm3MLP: Lfm3Mlp}
