"""Ovis 2's tower (``Ovis2VisionModel``): an AIMv2-named ViT, batch first, at ``transformer``
(``embeddings``, ``encoder.layers`` of blocks with ``rms_norm1``, ``attention``, ``rms_norm2``,
``ffn``, then ``rms_norm``), and the visual-vocabulary head after it.

``vision.tower_output`` is the transformer's output, a row a patch, before the head folds
``hidden_stride`` x ``hidden_stride`` patches into a token; ``vision.visual_words`` is what the
head makes of each token, a distribution over the visual words (the tower's ``pooler_output``)
that weights the table's rows into the features."""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import PerCall, Vision, config_size, patches, tower_envoys, value

#: The tower's names, from the tower: none is a name a Qwen2 text block has.
TOWER_RENAME = {
    "transformer.embeddings.patch_embedding": "patch_embed",
    "transformer.encoder.layers": "layers",
    "attention": "self_attn",
    "rms_norm1": "input_layernorm",
    "rms_norm2": "post_attention_layernorm",
    "ffn": "mlp",
}


def _stream(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state


def _put_stream(raw: Any, new: torch.Tensor) -> Any:
    raw.last_hidden_state = new
    return raw


class OvisVision(Vision):
    """The tower, its sizes off its config, and the visual vocabulary (computed after the
    transformer's output, before the table makes the features of it)."""

    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "visual_words", "image_features")

    hidden_stride = config_size("hidden_stride", "The side of the block of patches the head folds into one token.")
    visual_vocab_size = config_size("vocab_size", "The visual words, the structure tokens' rows among them.")

    tower_output = patches(
        lambda vision: f"{vision.path}.transformer.output", read=_stream, put=_put_stream,
        description="the last block's stream after the transformer's final norm, a row a patch, before the head",
    )

    @value("output", description="each image token's distribution over the visual words, [images, tokens, words]")
    def visual_words(self, raw: Any) -> torch.Tensor:
        return raw.pooler_output

    @visual_words.writes
    def visual_words(self, raw: Any, new: torch.Tensor) -> Any:
        raw.pooler_output = new
        return raw


#: The tower's module classes onto the standard envoys.
envoys = tower_envoys("ovis2", ("Ovis2VisionModel", "Ovis2VisionEncoderLayer", "Ovis2VisionAttention", "Ovis2MLP"),
                      vision=OvisVision)


class VisualTable(PerCall):
    """The visual-vocabulary table (the projector): called on the visual words' distribution
    (the features), then on the structure tokens' ids (their rows)."""

    def calls(self, inputs: dict) -> int:
        return 2 if inputs.get("pixel_values") is not None else 0


def wrapper_envoys(part: Any) -> dict[type, type]:
    """The table onto `VisualTable`."""
    from transformers.models.ovis2.modeling_ovis2 import Ovis2VisualEmbeddingTable

    return {Ovis2VisualEmbeddingTable: VisualTable}
