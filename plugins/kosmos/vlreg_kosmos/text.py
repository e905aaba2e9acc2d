"""Kosmos-2's text model (``Kosmos2TextTransformer`` at ``text_model.model``), as a text part.

A block (``Kosmos2TextBlock``) is pre-norm with plain residuals: ``self_attn_layer_norm``,
``self_attn`` (through transformers' attention interface, its heads projected back by
``out_proj``), the add, then ``final_layer_norm``, ``ffn`` (``fc1``, the activation, a LayerNorm
over the widened rows, ``fc2``) and the add; a cross-attention only where
``add_cross_attention`` (no published checkpoint sets it). The attention's class is also the
projector's cross-attention (``image_to_text_projection.x_attn``), so the envoys are keyed by
each block's path, never by class. The text attention norms its heads' joined outputs
(``inner_attn_ln``, a LayerNorm over all heads, on every published checkpoint) before
``out_proj``: ``attention_head_outputs`` is what ``out_proj`` is handed (`KosmosAttention`).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, eager_only, value


def _heads(attention: Any, raw: Any) -> Any:
    (joined, *_), _ = raw  # out_proj's (args, kwargs)
    return joined.unflatten(-1, (attention.num_heads, attention.head_dim))


def _joined(attention: Any, raw: Any, new: Any) -> Any:
    (joined, *rest), kwargs = raw
    return (new.reshape(joined.shape), *rest), kwargs


class KosmosAttention(Attention):
    """The text attention, whose heads' outputs are normed together before ``out_proj``
    (refused without eager attention, as the interior it belongs to is)."""

    refuses = {"attention_head_outputs": eager_only}

    attention_head_outputs = value(
        lambda attention: f"{attention.path}.out_proj.input",
        description="each head's slice of what o_proj is handed: the heads' outputs after the LayerNorm over all "
                    "of them (inner_attn_ln), [batch, seq, heads, head_dim]",
    )(_heads).writes(_joined)


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

    return {kosmos2.Kosmos2TextBlock: Layer, "layers.*.self_attn": KosmosAttention, kosmos2.Kosmos2TextFFN: Mlp}
