"""The Qwen3 line's tower: the Qwen ViT with learned positions, and DeepStack taps.

Every Qwen3 tower adds a learned grid of position embeddings (``pos_embed``, a
``sqrt(n)`` x ``sqrt(n)`` grid) to the patch embeddings before block 0, resampled
bilinearly to each image's grid of patches: `Qwen3Vision.position_embeddings` is that
resampled grid, ``[1, patches, vision_hidden_size]`` in merge-block order, so that
``vision.layers[0].input == patch_embeddings + position_embeddings``. On Qwen3-VL (and
-MoE) the tower also taps the stream after the blocks ``deepstack_visual_indexes`` names,
merges each tap to image tokens with a merger of its own, and returns them beside the
merger's output: `Qwen3Vision.deepstack_features`, one ``[image_tokens, hidden_size]`` per
tap; text block ``k`` receives tap ``k``.

`TOWERS` names each tower's classes by its own ``model_type``, and `tower_envoys` maps them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import VisionLayer, VisionMlp, adapter, as_patches, value, with_first

QWEN_VIT = adapter("qwen_vit")
QwenVision = QWEN_VIT.Vision

#: tower model type -> (its transformers module, the class-name prefix of its tower classes)
TOWERS = {
    "qwen3_vl_vision": ("qwen3_vl", "Qwen3VLVision"),
    "qwen3_vl_moe_vision": ("qwen3_vl_moe", "Qwen3VLMoeVision"),
    "qwen3_5_vision": ("qwen3_5", "Qwen3_5Vision"),
    "qwen3_5_moe_vision": ("qwen3_5_moe", "Qwen3_5MoeVision"),
    "cohere_compass_vision": ("cohere_compass", "CohereCompassVision"),  # Qwen3-VL's tower by another name
    "qwen4_exp_vision": ("qwen4_exp", "Qwen4ExpVision"),  # Qwen3.5-MoE's tower
}


def _no_taps(vision: Any) -> str | None:
    if getattr(vision._vision_config, "deepstack_visual_indexes", None):
        return None
    return "this tower has no DeepStack taps (vision_config.deepstack_visual_indexes is empty)"


def _deepstack(raw: Any) -> list:
    return list(raw.deepstack_features)


def _put_deepstack(vision: Any, raw: Any, new: Any) -> Any:
    raw["deepstack_features"] = list(new)
    return raw


class Qwen3Vision(QwenVision):
    """The Qwen3 tower (``model.visual``)."""

    sourced = True  # position_embeddings is read at an operation in the tower's forward
    refuses = {"deepstack_features": _no_taps}
    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "deepstack_features",
             "tower_output", "image_features")

    position_embeddings = value(
        "source.pos_embeds_to_0.output",
        description="the learned position grid resampled to each image, added before block 0",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: with_first(vision, raw, new.reshape(raw.shape)))

    deepstack_features = value(
        "output",
        layout="image_tokens",
        description="each DeepStack tap merged to image tokens, [image_tokens, hidden_size]; text block k gets tap k",
    )(lambda vision, raw: _deepstack(raw)).writes(_put_deepstack)

    @property
    def deepstack_visual_indexes(self) -> tuple[int, ...]:
        """The tower blocks DeepStack taps, in tap order (tap ``k`` feeds text block ``k``)."""
        return tuple(getattr(self._vision_config, "deepstack_visual_indexes", None) or ())


def tower_envoys(part: Any) -> dict:
    """The tower's classes onto their envoys, by the part's own model type: the Qwen ViT's
    attention (the ``"qwen_vit"`` adapter's) under `Qwen3Vision`."""
    module, prefix = TOWERS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    return {
        getattr(modeling, f"{prefix}Model"): Qwen3Vision,
        getattr(modeling, f"{prefix}Block"): VisionLayer,
        getattr(modeling, f"{prefix}Attention"): QWEN_VIT.Attention,
        getattr(modeling, f"{prefix}MLP"): VisionMlp,
    }
