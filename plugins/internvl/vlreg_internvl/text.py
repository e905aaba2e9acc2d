"""The Qwen3-MoE text model (the larger InternVL3.5 checkpoints'), as a text part any
wrapper can host.

Its blocks use the standard names (``self_attn``, ``mlp``, ``input_layernorm``,
``post_attention_layernorm``) and call transformers' attention interface once per block;
a block's MLP routes each token to a few experts (``Qwen3MoeSparseMoeBlock``: a router
``gate`` and the experts as 3-D weights, the layout `MoeMlp` reads), or is a dense MLP on
the blocks ``mlp_only_layers`` names. Only the module classes are mapped.

InternVL's other text models are served by other plugins' claims, nothing imported:
InternVL3's ``qwen2`` by vlreg-llava, InternVL3.5's dense ``qwen3`` by whichever
installed plugin claims it.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, MoeMlp

def text_envoys(part: Any) -> dict[type, type]:
    from transformers.models.qwen3_moe import modeling_qwen3_moe as qwen3_moe

    return {
        qwen3_moe.Qwen3MoeDecoderLayer: Layer,
        qwen3_moe.Qwen3MoeAttention: Attention,
        qwen3_moe.Qwen3MoeSparseMoeBlock: MoeMlp,
        qwen3_moe.Qwen3MoeMLP: Mlp,
    }
