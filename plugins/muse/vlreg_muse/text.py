"""Muse Glimmer's text blocks (``muse_glimmer_text``, ``MuseGlimmerTextDecoderLayer``).

Gemma 2's sandwich: each sublayer reads a norm of the stream and its output is normed again
before it is added (``post_attention_layernorm``, ``post_feedforward_layernorm``), so what the
attention and the MLP add to the stream is read at those norms (the adapter ``"sandwich"``,
vlreg-gemma) and ``input + attention_output + mlp_output == layer_output``. The attention
norms its queries and keys per head (no weights; the queries then scaled by
``qk_scale_factor``), rotates them on all but the NoPE blocks (``layer_rope_theta`` 0), and
gates its heads' outputs per channel (``sigmoid(gate_proj(x))``) before ``o_proj``: its head
outputs are read where ``o_proj`` receives them, after the gate (the adapter
``"gated_attention"``, vlreg-qwen3-vl), the ungated ones at the attention function's call.

The embedding (``MuseGlimmerTextNormedEmbedding``) norms what it looks up, so
``token_embeddings`` are normed rows; the wrapper embeds the prompt with the image
placeholders replaced by token 0, then writes the image in over them.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Layer, adapter

SANDWICH = adapter("sandwich")


class MuseAttention(adapter("gated_attention"), SANDWICH["attention"]):
    """Muse's attention: head outputs read after the output gate, what it adds to the
    stream at the block's post-attention norm."""


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.muse_glimmer import modeling_muse_glimmer as muse

    return {muse.MuseGlimmerTextDecoderLayer: Layer, muse.MuseGlimmerTextAttention: MuseAttention,
            muse.MuseGlimmerTextMLP: SANDWICH["mlp"]}
