"""T5Gemma 2's encoder and decoder under the standard envoy classes.

Both stacks' blocks are Gemma 3's sandwich: each sublayer's output normed before it is
added (``post_self_attn_layernorm``, ``post_feedforward_layernorm``), so ``attention_output``
and ``mlp_output`` are read at those norms (vlreg-gemma's ``"sandwich"`` adapter, the norms
renamed to its names) and the plain sum holds. An encoder block's attention is bidirectional
over the prompt; a decoder block's is a `MergedAttention`: one softmax over the decoder's
own positions (causal), then the encoder's output. The encoder's text model, mounted as
``encoder``, is an `Encoder`.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Encoder, Layer, MergedAttention, adapter

#: Gemma 3's names for the sandwich's norms, which the adapter reads.
RENAME = {"pre_self_attn_layernorm": "input_layernorm", "post_self_attn_layernorm": "post_attention_layernorm"}
SANDWICH = adapter("sandwich")


class SandwichMergedAttention(MergedAttention, SANDWICH["attention"]):
    """A decoder block's `MergedAttention`, whose block norms its output before adding it:
    ``attention_output`` is read at the post-attention norm."""


def envoys(part: Any) -> dict[type, type]:
    """Both stacks' blocks, attentions and MLPs, and the encoder, onto their envoys."""
    from transformers.models.t5gemma2 import modeling_t5gemma2 as t5gemma2

    return {
        t5gemma2.T5Gemma2TextEncoder: Encoder,
        t5gemma2.T5Gemma2EncoderLayer: Layer,
        t5gemma2.T5Gemma2DecoderLayer: Layer,
        t5gemma2.T5Gemma2SelfAttention: SANDWICH["attention"],
        t5gemma2.T5Gemma2MergedAttention: SandwichMergedAttention,
        t5gemma2.T5Gemma2MLP: SANDWICH["mlp"],
    }
