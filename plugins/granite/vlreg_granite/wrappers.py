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

from typing import Any

from vlreg.plugin import Injections, hidden_states_read_only


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
