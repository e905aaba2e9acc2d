"""IDEFICS (1)'s text model (``idefics``: its config is the wrapper's own) under the standard envoys.

``IdeficsModel`` keeps its blocks in two lists and runs them in turn: before ``layers[i]``,
for every ``i`` divisible by ``cross_layer_interval``, a gated cross-attention block from
``gated_cross_attn_layers``. ``model.layers`` is both in that order (`Interleaved`): a
``IdeficsDecoderLayer`` is a plain `Layer`, a ``IdeficsGatedCrossAttentionLayer`` a
`GatedCrossLayer`:

    h   = input + tanh(alpha_cross_attn) * text_row_mask * cross_attn(norm(input), image states)
    out = h + tanh(alpha_dense) * mlp(norm(h))

``text_row_mask`` (the block's ``cross_attention_gate``) is 0 at text tokens that attend no
image (before the first image). Both kinds of block use ``IdeficsAttention``, so the two
attentions are told apart by where they sit, not by class.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import Attention, CrossAttentionLayer, CrossAttentionMixer, Layer, Mlp, Unavailable, read_only, value


def _shared_mask(layer: Any) -> str:
    return (
        "the text model computes it once from the processor's image_attention_mask and hands the same tensor "
        "to every cross-attention block, so an edit here would reach them all; to change which tokens see an "
        "image, edit the trace's image_attention_mask"
    )


def _row_mask(layer: Any, raw: Any) -> torch.Tensor:
    mask = raw[1].get("cross_attention_gate")
    if mask is None:
        raise Unavailable(f"{layer.label('text_row_mask')} is unavailable: the block was called without a cross_attention_gate")
    return mask


class GatedCrossLayer(CrossAttentionLayer):
    """An IDEFICS gated cross-attention block: tanh-gated attention to the image, reaching
    only the tokens that attend an image, then a tanh-gated MLP."""

    order = ("input", "text_row_mask", "cross_attn", "mlp", "output", "layer_output")
    refuses = {"text_row_mask": read_only(_shared_mask)}
    row_masked = "attention"

    text_row_mask = value(
        "input",
        description="[batch, seq]: 1 at text tokens that attend an image (the attention's output reaches only those)",
    )(_row_mask)

    @property
    def attention_gate(self) -> torch.Tensor:
        """``tanh(alpha_cross_attn)``: what the block scales the attention's output by."""
        return self._module.alpha_cross_attn.tanh()

    @property
    def mlp_gate(self) -> torch.Tensor:
        """``tanh(alpha_dense)``: what the block scales the MLP's output by."""
        return self._module.alpha_dense.tanh()


class IdeficsCrossAttention(CrossAttentionMixer):
    """IDEFICS's cross attention: keys from the image's states (the tower's width), normed
    per head (``k_layer_norm``) where the config sets ``qk_layer_norms``; no rotary embedding."""

    def project(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = super().project(states)
        norm = getattr(self._module, "k_layer_norm", None) if self._module.qk_layer_norms else None
        return (keys if norm is None else norm(keys)), values


def envoys(part: Any) -> dict:
    """The text model's module classes onto their envoys; its attention by where it sits
    (one class serves both kinds of block)."""
    from transformers.models.idefics import modeling_idefics as idefics

    return {
        idefics.IdeficsDecoderLayer: Layer,
        idefics.IdeficsGatedCrossAttentionLayer: GatedCrossLayer,
        idefics.IdeficsMLP: Mlp,
        "gated_cross_attn_layers.*.cross_attn": IdeficsCrossAttention,
        "layers.*.self_attn": Attention,
    }
