"""Qwen3-Omni's Qwen3-VL parts, and what of them is not served yet.

Qwen3-Omni's tower is Qwen3-VL's: it adds a learned position grid, resampled to each image,
to the patch embeddings before block 0, and taps its stream after the blocks
``deepstack_visual_indexes`` names; its text model adds tap ``k`` to the stream at the image
tokens right after block ``k`` (DeepStack). vlreg-qwen3-vl serves both on the Qwen3-VL line,
in classes of its own that it does not publish to other plugins, so here the three values
are named and refused with where to read them meanwhile: the rest of the tower and of the
blocks is served as on any Qwen ViT and text model (``layers[k].layer_output`` is the block's
own output, before DeepStack's addition).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Layer, adapter, value

QwenVision = adapter("qwen_vit").Vision


def _taps(envoy: Any) -> int:
    return len(getattr(envoy.root._module.config.vision_config, "deepstack_visual_indexes", None) or ())


def _deepstack_not_served(layer: Any) -> str:
    taps, block = _taps(layer), layer.block_index
    if block >= taps:
        return f"the tower's {taps} DeepStack taps feed layers[0] to layers[{taps - 1}] only"
    after = f"layers[{block + 1}].input" if block + 1 < layer.root.num_layers else "norm.input"
    return (
        f"what Qwen3-Omni adds to the stream at the image tokens after this block (DeepStack tap {block}) is "
        f"not served on this family yet: {after} minus this block's layer_output, at vision.image_token_mask, "
        f"is that addition"
    )


def _positions_not_served(vision: Any) -> str:
    return (
        "Qwen3-Omni's learned position grid, resampled to each image and added before block 0, is not served "
        "on this family yet: vision.layers[0].input minus vision.patch_embeddings is it"
    )


def _taps_not_served(vision: Any) -> str:
    return (
        "Qwen3-Omni's DeepStack taps of the tower are not served on this family yet: the tower's output "
        "holds them (vision.output.deepstack_features, one [image_tokens, hidden_size] per tap)"
    )


class DeepStackLayer(Layer):
    """A Qwen3-Omni text block; what DeepStack adds after it is named and refused."""

    order = (*Layer.order, "deepstack_output")

    deepstack_output = value(
        "output", unavailable=_deepstack_not_served, needs_images=True,
        description="what DeepStack adds to the stream at the image tokens after this block (not served here)",
    )(lambda layer, raw: raw)


class Qwen3OmniVision(QwenVision):
    """Qwen3-Omni's tower: the Qwen ViT, its learned positions and DeepStack taps refused."""

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "deepstack_features",
             "tower_output", "image_features")

    position_embeddings = value(
        "output", unavailable=_positions_not_served,
        description="the learned position grid resampled to each image, added before block 0 (not served here)",
    )(lambda vision, raw: raw)
    deepstack_features = value(
        "output", unavailable=_taps_not_served,
        description="each DeepStack tap merged to image tokens (not served here)",
    )(lambda vision, raw: raw)
