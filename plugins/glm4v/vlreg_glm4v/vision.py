"""The GLM-V line's tower: the Qwen ViT, with a downsampling convolution after its blocks.

The tower runs on every image's patches packed in one row in merge-block order and calls
the attention once per image, as the Qwen ViT does, so its envoy classes are the
``"qwen_vit"`` adapter's. After its blocks it norms the stream (``post_layernorm``), then
a ``Conv2d`` (``downsample``) maps each ``spatial_merge_size`` x ``spatial_merge_size``
block of patches to one row ``out_hidden_size`` wide, and the merger (the projector)
projects those rows; the tower returns the merger's output as its pooled output and the
convolution's as ``last_hidden_state``. So:

* ``tower_output`` is ``post_layernorm``'s output, the last block's stream after the final
  norm, ``[1, patches, vision_hidden_size]``; a write to it reaches the convolution;
* the blocks' MLPs are ``out_hidden_size`` wide, while ``vision_config.intermediate_size``
  is the merger's hidden width: the sizes are read off the modules.

GLM-4.1V's tower (and GLM-4.5V's and GLM-4.6V's) also norms the patch embedding's output
(``post_conv_layernorm``) and adds a learned grid of positions resampled to each image
(bicubic, in ``embeddings``): `Glm4vVision` serves ``patch_embeddings`` after that norm and
the resampled grid as ``position_embeddings``, so ``vision.layers[0].input ==
patch_embeddings + position_embeddings``. GLM-OCR's tower has neither (`GlmVision`).

A video's frames are written with the image's placeholder token; the processor's
``mm_token_type_ids`` tell them apart (`vlreg.plugin.Scatter.token_types`, on the wrappers'
entry).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import At, Vision, VisionLayer, VisionMlp, adapter, as_patches, patches, value

QWEN_VIT = adapter("qwen_vit")
QwenVision = QWEN_VIT.Vision


class GlmVision(QwenVision):
    """The GLM tower (``model.visual``): the Qwen ViT, then ``post_layernorm``, the
    downsampling convolution and the merger."""

    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "image_features")

    tower_output = patches(
        lambda vision: f"{vision.post_layernorm.path}.output",
        read=lambda raw: raw,
        put=lambda raw, new: new,
        description="the last block's stream after the tower's final norm (post_layernorm), before the "
                    "downsampling convolution",
    )

    #: read off the blocks' MLPs, as the core's `Vision` does: the config's
    #: ``intermediate_size`` is the merger's width, not theirs
    intermediate_size = Vision.intermediate_size


def _put_patches(vision: Any, raw: Any, new: Any) -> Any:
    return new.reshape(raw.shape)


class Glm4vVision(GlmVision):
    """GLM-4.1V's tower: `GlmVision` with a normed patch embedding and learned positions."""

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "image_features")

    patch_embeddings = value(
        lambda vision: f"{vision.post_conv_layernorm.path}.output",
        description="the patch embedding's output after its norm (post_conv_layernorm), one row per patch",
    )(lambda vision, raw: as_patches(raw)).writes(_put_patches)

    position_embeddings = value(
        At(lambda vision: f"{vision.embeddings.path}.source.to_1.output", inside=lambda vision: vision.embeddings),
        description="the learned position grid resampled to each image, added before block 0",
    )(lambda vision, raw: as_patches(raw)).writes(_put_patches)


#: tower model type -> (transformers module, class-name prefix, its MLP's class name, envoy)
TOWERS = {
    "glm4v_vision": ("glm4v", "Glm4vVision", "Glm4VisionMlp", Glm4vVision),
    "glm4v_moe_vision": ("glm4v_moe", "Glm4vMoeVision", "Glm4vMoeisionMlp", Glm4vVision),
    "glm_ocr_vision": ("glm_ocr", "GlmOcrVision", "GlmOcrVisionMlp", GlmVision),
    # GLM-5-Next's: GLM-OCR's, its MLPs' gate and up projections clamped
    "glm5_next_vision": ("glm5_next", "Glm5NextVision", "Glm5NextVisionMLP", GlmVision),
}


def tower_envoys(part: Any) -> dict:
    """The tower's classes onto their envoys, by the part's own model type (`TOWERS`); the
    attention is the Qwen ViT's (the ``"qwen_vit"`` adapter's)."""
    module, prefix, mlp, tower = TOWERS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    return {getattr(modeling, f"{prefix}Model"): tower, getattr(modeling, f"{prefix}Block"): VisionLayer,
            getattr(modeling, f"{prefix}Attention"): QWEN_VIT.Attention, getattr(modeling, mlp): VisionMlp}
