"""vlreg-qwen2-5-vl: the Qwen2.5-VL family, declared against `vlreg.plugin`.

Qwen2_5_VLForConditionalGeneration has Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, the
``masked_scatter`` in ``model``'s forward), so the paths, the tower's names and its
envoy classes are the ones vlreg-qwen2-vl publishes as the adapter ``"qwen_vit"``. What
differs is the tower: RMSNorm blocks, a biased SwiGLU MLP and windowed attention, served
by `WindowedQwenVision`.
"""

from vlreg.plugin import Attention, Claim, Layer, Mlp, VisionLayer, VisionMlp, adapter, hookimpl

from .windows import WindowedQwenVision, window_layout

QWEN_VIT = adapter("qwen_vit")

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
    return {"wrapper": QWEN_VIT.wrapper_rename, "vision": QWEN_VIT.tower_rename}.get(part.kind)


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
            qwen2_5_vl.Qwen2_5_VLVisionAttention: QWEN_VIT.Attention,
            qwen2_5_vl.Qwen2_5_VLMLP: VisionMlp,
        }
    return None


@hookimpl
def vlreg_scatter(part):
    return QWEN_VIT.scatter


@hookimpl
def vlreg_read_only(part):
    return QWEN_VIT.read_only if part.kind == "wrapper" else None


@hookimpl
def vlreg_image_grids(part):
    return QWEN_VIT.image_grids


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import build_qwen2_5_vl

    return {"qwen2_5_vl": build_qwen2_5_vl}
