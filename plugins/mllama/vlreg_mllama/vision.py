"""Mllama's tiled tower (``mllama_vision_model``) under the standard envoy classes.

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

from vlreg.plugin import Vision, config_size, patches, tower_envoys


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

    max_num_tiles = config_size("max_num_tiles", "Tiles an image is cut into at most (and padded to).")
    vision_output_dim = config_size("vision_output_dim",
                                    "The width of ``tower_output``: the hidden width times one plus the taps.")


envoys = tower_envoys(
    "mllama", ("MllamaVisionModel", "MllamaVisionEncoderLayer", "MllamaVisionAttention", "MllamaVisionMLP"),
    vision=MllamaVision)
