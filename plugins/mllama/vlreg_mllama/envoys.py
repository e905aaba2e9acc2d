"""Mllama's modules under the standard envoy classes.

The text blocks are of two kinds: ``MllamaSelfAttentionDecoderLayer`` (a Llama block,
plain `Layer`) and ``MllamaCrossAttentionDecoderLayer``, served as `GatedCrossLayer`:

    h   = input + tanh(cross_attn_attn_gate) * cross_attn(norm(input), image states)
    out = h + tanh(cross_attn_mlp_gate) * text_row_mask * mlp(norm(h))

so ``layer_output == input + attention_gate * cross_attn.attention_output + mlp_gate *
text_row_mask * mlp.mlp_output`` (the mask is 0 at text tokens with no image before
them). The cross attention norms its queries and keys per head (``q_norm``, ``k_norm``)
and has no rotary embedding.

The tower is tiled: each image is cut into up to ``max_num_tiles`` tiles of
``image_size`` pixels; a tile is a class token and its patches, padded to a multiple of 8
rows. The local blocks (``vision.layers``) run over each image's tiles together, the
gated global blocks (``vision.global_layers``) after them; ``vision.tower_output`` is what
the projector reads: the global blocks' output beside the local blocks' taps
(``intermediate_layers_indices``), concatenated, padding rows dropped.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.models.mllama import modeling_mllama as M

from vlreg.plugin import (
    Attention,
    CrossAttentionLayer,
    CrossAttentionMixer,
    Layer,
    Mlp,
    Unavailable,
    Vision,
    VisionAttention,
    VisionLayer,
    VisionMlp,
    patches,
    value,
)


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

    text_row_mask = value(
        "input",
        read_only=_shared_mask,
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


def _outputs(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state.flatten(0, 2)


def _put_outputs(raw: Any, new: torch.Tensor) -> Any:
    raw["last_hidden_state"] = new.reshape(raw.last_hidden_state.shape)
    return raw


class MllamaVision(Vision):
    """The tiled tower: local blocks, then gated global blocks; a class token a tile."""

    standard_children = {"layers": "", "global_layers": "global_layers."}
    order = ("image_token_mask", "patch_embeddings", "layers", "global_layers", "tower_output", "image_features")
    class_tokens = 1

    tower_output = patches(
        "output",
        read=_outputs,
        put=_put_outputs,
        description=(
            "what the projector reads, [tiles, patches, vision_output_dim]: the global blocks' output "
            "beside the local blocks' taps, concatenated"
        ),
    )

    @property
    def num_global_layers(self) -> int:
        """The gated global blocks, after the local ones."""
        return len(self.global_layers)

    @property
    def max_num_tiles(self) -> int:
        """Tiles an image is cut into at most (and padded to)."""
        return self._vision_config.max_num_tiles

    @property
    def vision_output_dim(self) -> int:
        """The width of ``tower_output``: the hidden width times one plus the taps."""
        return self._vision_config.vision_output_dim


ENVOYS = {
    "wrapper": None,
    "text": {
        M.MllamaSelfAttentionDecoderLayer: Layer,
        M.MllamaCrossAttentionDecoderLayer: GatedCrossLayer,
        M.MllamaTextSelfAttention: Attention,
        M.MllamaTextCrossAttention: MllamaCrossAttention,
        M.MllamaTextMLP: Mlp,
    },
    "vision": {
        M.MllamaVisionModel: MllamaVision,
        M.MllamaVisionEncoderLayer: VisionLayer,
        M.MllamaVisionAttention: VisionAttention,
        M.MllamaVisionMLP: VisionMlp,
    },
}
