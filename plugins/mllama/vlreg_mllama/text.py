"""Mllama's text model (``mllama_text_model``) under the standard envoy classes.

The text blocks are of two kinds: ``MllamaSelfAttentionDecoderLayer`` (a Llama block,
plain `Layer`) and ``MllamaCrossAttentionDecoderLayer``, served as `GatedCrossLayer`:

    h   = input + tanh(cross_attn_attn_gate) * cross_attn(norm(input), image states)
    out = h + tanh(cross_attn_mlp_gate) * text_row_mask * mlp(norm(h))

so ``layer_output == input + attention_gate * cross_attn.attention_output + mlp_gate *
text_row_mask * mlp.mlp_output`` (the mask is 0 at text tokens with no image before
them). The cross attention norms its queries and keys per head (``q_norm``, ``k_norm``)
and has no rotary embedding.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import Attention, CrossAttentionLayer, CrossAttentionMixer, Layer, Mlp, Unavailable, read_only, value


def _shared_mask(layer: Any) -> str:
    return (
        "the text model computes it once from the processor's cross_attention_mask and hands the same "
        "tensor to every cross-attention block, so an edit here would reach them all; to change which "
        "tokens see an image, edit the prompt (the <|image|> placeholders) or the trace's cross_attention_mask"
    )


def _row_mask(layer: Any, raw: Any) -> torch.Tensor:
    mask = raw[1].get("full_text_row_masked_out_mask")
    if mask is None:
        raise Unavailable(
            f"{layer.label('text_row_mask')} is unavailable: the model was called without a cross_attention_mask"
        )
    return mask[:, 0, :, 0]


class GatedCrossLayer(CrossAttentionLayer):
    """A Mllama cross-attention block: tanh-gated attention to the image, then a gated
    MLP that reaches only the text rows with an image before them."""

    order = ("input", "text_row_mask", "cross_attn", "mlp", "output", "layer_output")
    refuses = {"text_row_mask": read_only(_shared_mask)}

    text_row_mask = value(
        "input",
        description="[batch, seq]: 1 at text tokens with an image before them (the MLP's output reaches only those)",
    )(_row_mask)

    @property
    def attention_gate(self) -> torch.Tensor:
        """``tanh(cross_attn_attn_gate)``: what the block scales the attention's output by."""
        return self._module.cross_attn_attn_gate.tanh()

    @property
    def mlp_gate(self) -> torch.Tensor:
        """``tanh(cross_attn_mlp_gate)``: what the block scales the MLP's output by."""
        return self._module.cross_attn_mlp_gate.tanh()


class MllamaCrossAttention(CrossAttentionMixer):
    """Mllama's cross attention: queries and keys normed per head (``q_norm``, ``k_norm``)
    before the attention function, no rotary embedding."""

    def project(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = super().project(states)
        return self._module.k_norm(keys), values


def envoys(part: Any) -> dict[type, type]:
    """The text model's module classes onto their envoys (the modeling module is imported
    when a checkpoint resolves, not with the plugin)."""
    from transformers.models.mllama import modeling_mllama as mllama

    return {
        mllama.MllamaSelfAttentionDecoderLayer: Layer,
        mllama.MllamaCrossAttentionDecoderLayer: GatedCrossLayer,
        mllama.MllamaTextSelfAttention: Attention,
        mllama.MllamaTextCrossAttention: MllamaCrossAttention,
        mllama.MllamaTextMLP: Mlp,
    }
