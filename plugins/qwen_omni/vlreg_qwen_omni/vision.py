"""The omni thinkers' towers: the Qwen ViT (the ``"qwen_vit"`` adapter's envoys), and
Qwen3-Omni's with its learned positions and DeepStack taps named and refused.

Qwen3-Omni's tower is Qwen3-VL's: it adds a learned position grid, resampled to each image,
to the patch embeddings before block 0, and taps its stream after the blocks
``deepstack_visual_indexes`` names. vlreg-qwen3-vl serves both on the Qwen3-VL line, in
classes of its own that it does not publish to other plugins, so here `Qwen3OmniVision`
names the two values and refuses them with where to read them meanwhile: the rest of the
tower is served as on any Qwen ViT.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import adapter, tower_envoys, value

QWEN_VIT = adapter("qwen_vit")
QwenVision = QWEN_VIT.Vision


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


class Qwen3OmniVision(QwenVision):
    """Qwen3-Omni's tower: the Qwen ViT, its learned positions and DeepStack taps refused."""

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "deepstack_features",
             "tower_output", "image_features")
    refuses = {"position_embeddings": _positions_not_served, "deepstack_features": _taps_not_served}

    position_embeddings = value(
        "output",
        description="the learned position grid resampled to each image, added before block 0 (not served here)",
    )(lambda vision, raw: raw)
    deepstack_features = value(
        "output",
        description="each DeepStack tap merged to image tokens (not served here)",
    )(lambda vision, raw: raw)


qwen2_5_tower_envoys = tower_envoys(
    "qwen2_5_omni", ("Qwen2_5OmniVisionEncoder", "Qwen2_5OmniVisionBlock", "Qwen2_5OmniVisionAttention", "Qwen2_5OmniMLP"),
    vision=QwenVision, attention=QWEN_VIT.Attention)
qwen3_tower_envoys = tower_envoys(
    "qwen3_omni_moe", ("Qwen3OmniMoeVisionEncoder", "Qwen3OmniMoeVisionBlock", "Qwen3OmniMoeVisionAttention",
                       "Qwen3OmniMoeVisionMLP"),
    vision=Qwen3OmniVision, attention=QWEN_VIT.Attention)
