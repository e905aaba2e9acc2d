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

from vlreg.plugin import (PACKED_SIGLIP_RENAME, LearnedPositions, PackedVision, PerCall, PerImageAttention, Vision,
                          config_size, patches, tower_envoys, value)

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


# -- Ovis 2.5 (``ovis2_5``, transformers 5.25) ----------------------------------------
#
# Ovis 2.5's tower (``Ovis2_5VisionModel``, transformers 5.25) and where its tokens lie.
#
# The tower packs every image's patches into one ``[patches, hidden]`` row in merge-block order
# (SigLIP's names: `vlreg.plugin.PACKED_SIGLIP_RENAME`), adds learned positions resampled to
# each image, then regroups the row window by window (``window_size`` pixels a side, as
# Qwen2.5-VL's tower does) before its blocks, which call the attention once per image or per
# window over ``cu_seqlens`` (`vlreg.plugin.PerImageAttention`). The projector does not read
# the tower's output (``post_layernorm`` after the rows are put back in order) but the last
# block's output, still in window order: `Ovis2_5Vision.tower_output` is served there, at the
# projector's input. The projector folds each merge block's patches into a distribution over the
# visual words (``visual_tokenizer``, `Ovis2_5Vision.visual_words`) and weights the table's rows
# by it; ``model``'s first ``inputs_embeds.masked_scatter`` writes those features in window
# order, so an image's tokens run window after window, each window's in raster order: one
# `ImageGrid` per window (`image_grids`).


OVIS2_5_RENAME = PACKED_SIGLIP_RENAME


def _projector_input(vision: Any) -> str:
    return f"{vision.path.rsplit('.', 1)[0]}.multi_modal_projector.input"


class Ovis2_5Vision(LearnedPositions, PackedVision):
    """The packed, windowed SigLIP-named tower, its stream in window order from block 0 on;
    its learned positions resampled per image in ``embeddings`` and added to the patches in
    merge-block order, before the regrouping (so block 0 receives the sum reordered)."""

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "visual_words",
             "image_features")
    positions_module = "embeddings"
    positions_call = "pos_embeds_to_0"
    positions_add_to_patches = False
    max_aspect_ratio = 200  # the image processor's resize clamps longer sides to 200 times the shorter
    window_size = config_size("window_size", "The side of an attention window, in pixels of the resized image.")
    visual_vocab_size = config_size("vocab_size", "The visual words, the four indicator rows among them.")
    patterns_unfoldable = (
        "the tower's rows and the image's tokens run window by window (a grid per window), so no one pattern "
        "folds onto an image's grid; self_attn.patterns(queries, keys, self_attn.inputs[1]['cu_seqlens']) gives "
        "each call's pattern over its patches, in window order")

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image the processor's resize makes a side of no pixels: one far thinner than
        the other is widened to a token's side, then scaled down whole to the pixel budget."""
        found = super().image_refusal(width, height)
        if found is not None:
            return found
        from transformers.models.ovis2_5.image_processing_ovis2_5 import smart_resize

        processor = self.root.processor.image_processor
        size = processor.size
        if isinstance(size, dict):
            low, high = size["shortest_edge"], size["longest_edge"]
        else:
            low, high = size.shortest_edge, size.longest_edge
        resized = smart_resize(height, width, factor=processor.patch_size * processor.merge_size, min_pixels=low,
                               max_pixels=high)
        if min(resized) > 0:
            return None
        return ("the processor's resize widens its thin side to one token, then scales the image down to its pixel "
                "budget, leaving a side of no pixels: pad it closer to square")

    tower_output = patches(
        _projector_input, read=lambda raw: raw[0][0], put=lambda raw, new: ((new, *raw[0][1:]), raw[1]),
        description="the last block's stream, a row a patch in window order, before the final norm: what the "
                    "projector reads (the tower's own output, normed and back in merge-block order, feeds nothing)",
    )

    @value(lambda vision: f"{_projector_input(vision)[: -len('.input')]}.visual_tokenizer.output",
           description="each image token's distribution over the visual words, the indicator rows' zeros after it")
    def visual_words(self, raw: torch.Tensor) -> torch.Tensor:
        return raw[None]

    @visual_words.writes
    def visual_words(self, raw: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return new.reshape(raw.shape)


ovis2_5_envoys = tower_envoys(
    "ovis2_5", ("Ovis2_5VisionModel", "Ovis2_5VisionEncoderLayer", "Ovis2_5VisionAttention", "Ovis2_5VisionMLP"),
    vision=Ovis2_5Vision, attention=PerImageAttention)
