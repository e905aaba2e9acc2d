"""Kosmos-2's text model (``Kosmos2TextTransformer`` at ``text_model.model``), as a text part.

A block (``Kosmos2TextBlock``) is pre-norm with plain residuals: ``self_attn_layer_norm``,
``self_attn`` (through transformers' attention interface, its heads projected back by
``out_proj``), the add, then ``final_layer_norm``, ``ffn`` (``fc1``, the activation, a LayerNorm
over the widened rows, ``fc2``) and the add; a cross-attention only where
``add_cross_attention`` (no published checkpoint sets it). The attention's class is also the
projector's cross-attention (``image_to_text_projection.x_attn``), so the envoys are keyed by
each block's path, never by class.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp


def rename(part: Any) -> dict[str, str]:
    """Each block's norms, MLP and output projection by their standard names, keyed from the
    text model by the block's path."""
    names: dict[str, str] = {}
    for i in range(part.config.layers):
        names[f"layers.{i}.self_attn_layer_norm"] = f"layers.{i}.input_layernorm"
        names[f"layers.{i}.final_layer_norm"] = f"layers.{i}.post_attention_layernorm"
        names[f"layers.{i}.ffn"] = f"layers.{i}.mlp"
        names[f"layers.{i}.self_attn.out_proj"] = f"layers.{i}.self_attn.o_proj"
    return names


def envoys(part: Any) -> dict[Any, type]:
    from transformers.models.kosmos2 import modeling_kosmos2 as kosmos2

    return {kosmos2.Kosmos2TextBlock: Layer, "layers.*.self_attn": Attention, kosmos2.Kosmos2TextFFN: Mlp}
