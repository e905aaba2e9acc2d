"""vlreg-qwen2-5-vl: the Qwen2.5-VL family, declared against `vlreg.plugin`.

Qwen2_5_VLForConditionalGeneration has Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, the
``masked_scatter`` in ``model``'s forward), so the paths and the tower's names are
Qwen2-VL's, imported from that plugin. What differs is the tower: RMSNorm blocks, a
biased SwiGLU MLP and windowed attention, served by `WindowedQwenVision`.
"""

from vlreg.plugin import Attention, Claim, Layer, Mlp, VisionLayer, VisionMlp, hookimpl
from vlreg_qwen2_vl import READ_ONLY, SCATTER, TOWER_RENAME, WRAPPER_RENAME
from vlreg_qwen2_vl.vit import QwenVisionAttention

from .windows import WindowedQwenVision, window_layout

__all__ = ["WindowedQwenVision", "window_layout"]


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [
        Claim("wrapper", "qwen2_5_vl"),
        Claim("text", "qwen2_5_vl_text"),
        Claim("vision", "qwen2_5_vl_vision"),
    ]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": WRAPPER_RENAME, "vision": TOWER_RENAME}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen2_5_vl

    if part.kind == "text":
        return {
            qwen2_5_vl.Qwen2_5_VLDecoderLayer: Layer,
            qwen2_5_vl.Qwen2_5_VLAttention: Attention,
            qwen2_5_vl.Qwen2MLP: Mlp,
        }
    if part.kind == "vision":
        return {
            qwen2_5_vl.Qwen2_5_VisionTransformerPretrainedModel: WindowedQwenVision,
            qwen2_5_vl.Qwen2_5_VLVisionBlock: VisionLayer,
            qwen2_5_vl.Qwen2_5_VLVisionAttention: QwenVisionAttention,
            qwen2_5_vl.Qwen2_5_VLMLP: VisionMlp,
        }
    return None


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_read_only(part):
    return READ_ONLY if part.kind == "wrapper" else None


@hookimpl
def vlreg_image_grids(part):
    from vlreg_qwen2_vl.geometry import qwen_image_grids

    return qwen_image_grids


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import build_qwen2_5_vl

    return {"qwen2_5_vl": build_qwen2_5_vl}
