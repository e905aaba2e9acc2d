"""Granite 4 Vision (``granite4_vision``): LLaVA-NeXT's layout whose projectors are windowed
Q-Formers and whose features are added before several text blocks, not scattered.

``model.layerwise_projectors[i]`` reads the CLIP tower's stream ``hidden_states[v]`` for each
pair ``(v, k)`` of ``deepstack_layer_map``, ``model.spatial_projectors[j]`` the stream
``hidden_states[spatial_vision_layer]`` for each block of ``spatial_target_layers``; each is a
``Granite4VisionWindowQFormerDownsampler`` (a norm, learned queries, a one-layer BLIP-2
Q-Former, ``out_linear``) that turns each window of patches into fewer tokens
(``downsample_rate``, "query side / window side"); the features are then unpadded and given
newline rows as LLaVA-NeXT's. ``model`` zeroes the embeddings at the image tokens and hands the
text model ``{k: features}``; before each block ``k`` its loop adds them at the image tokens
(`vlreg.plugin.Injections`: ``vision.image_features`` is the first block's, each block's own
is its ``deepstack_input``). Granite's µP multipliers as on Granite-Docling: embeddings times
``embedding_multiplier`` before block 0 (the features are added after it), each sublayer's
output times ``residual_multiplier``, the logits divided by ``logits_scaling``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from vlreg.plugin import (IMAGES, At, Attention, Injections, Mlp, ScaledResidualLayer, Unavailable, adapter,
                          hidden_states_read_only, returned)


def injected_blocks(config: Any) -> list[int]:
    """The text blocks the features are added before, in block order: the keys of the
    wrapper's ``{block: features}`` (a block mapped twice takes the later set only, as the
    dict does)."""
    return sorted({block for _, block in config.deepstack_layer_map} | set(config.spatial_target_layers))


def read_layers(config: Any) -> list[int]:
    """The tower's ``hidden_states`` the projectors read."""
    return [*(layer for layer, _ in config.deepstack_layer_map), config.spatial_vision_layer]


#: The projectors read the tower's hidden states, not its output (`hidden_states_read_only`).
READ_ONLY = hidden_states_read_only(name="deepstack_layer_map and spatial_vision_layer", layers=read_layers)

ENTRY = Injections(
    host="model.language_model", operation="deepstack_features_to_0", scale="embedding_multiplier",
    not_patches_reason=(
        "Granite 4 Vision's image tokens are a windowed Q-Former's queries, each reading a window of the "
        "tower's patches, not patches or blocks of them; read the tower's own values over its patches"),
)


def _text_model(layer: Any) -> Any:
    return layer.parent.parent


def _mapped(layer: Any) -> list[int]:
    return injected_blocks(layer.root._module.config)


def _no_injection(layer: Any) -> str | None:
    blocks = _mapped(layer)
    if layer.block_index in blocks:
        return None
    return f"Granite 4 Vision adds image features before text blocks {blocks} only (deepstack_layer_map, " \
           f"spatial_target_layers)"


class Granite4Layer(ScaledResidualLayer):
    """A Granite block, and the image features the text model adds before it."""

    order = ("deepstack_input", *ScaledResidualLayer.order)
    refuses = {"deepstack_input": (_no_injection, IMAGES)}

    deepstack_input = returned(
        At(lambda layer: f"{_text_model(layer).path}.source.deepstack_features_to_0.output",
           inside=_text_model, occurrence=lambda layer: _mapped(layer).index(layer.block_index)),
        layout="image_tokens",
        description="what the text model adds to the stream at the image tokens before this block, "
                    "[image_tokens, hidden]",
    )


def text_envoys(part: Any) -> dict[type, type]:
    from transformers.models.granite4_vision import modeling_granite4_vision as granite4

    return {granite4.Granite4VisionTextDecoderLayer: Granite4Layer, granite4.Granite4VisionTextAttention: Attention,
            granite4.Granite4VisionTextMLP: Mlp}


def image_grids(config: Any):
    """LLaVA-NeXT's grids (vlreg-llava's adapter ``"next_image_grids"``), a token covering a
    square of ``patch_size / downsample_rate`` pixels of its tile."""
    side = config.vision_config.patch_size / Fraction(config.downsample_rate)
    if side.denominator != 1:
        def refuse(encoding: Any, images: Any, processor: Any) -> Any:
            raise Unavailable(f"vision.geometry is unavailable: a token covers {float(side)} pixels of a tile "
                              f"(patch_size / downsample_rate), not a whole number")
        return refuse
    return adapter("next_image_grids")(config, int(side))
