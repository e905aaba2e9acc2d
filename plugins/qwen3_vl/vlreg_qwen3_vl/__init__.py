"""vlreg-qwen3-vl: the Qwen3 line, declared against `vlreg.plugin`.

Qwen3VLForConditionalGeneration keeps Qwen2-VL's layout (the text model at
``model.language_model``, the Qwen ViT at ``model.visual`` with its merger, the
``masked_scatter`` in ``model``'s forward), so the mounts, the tower's names, the scatter
and the tower's attention come from the ``"qwen_vit"`` adapter vlreg-qwen2-vl publishes.
What the line adds is served here: learned tower positions and DeepStack taps
(`vision`), and DeepStack's additions to the first text blocks (`text`).
"""

from vlreg.plugin import Attention, Claim, Mlp, VisionLayer, VisionMlp, adapter, hookimpl

from .text import DeepStackLayer
from .vision import Qwen3Vision

QWEN_VIT = adapter("qwen_vit")


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "qwen3_vl"), Claim("text", "qwen3_vl_text"), Claim("vision", "qwen3_vl_vision")]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": QWEN_VIT.wrapper_rename, "vision": QWEN_VIT.tower_rename}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    from transformers.models.qwen3_vl import modeling_qwen3_vl as qwen3_vl

    if part.kind == "text":
        return {
            qwen3_vl.Qwen3VLTextDecoderLayer: DeepStackLayer,
            qwen3_vl.Qwen3VLTextAttention: Attention,
            qwen3_vl.Qwen3VLTextMLP: Mlp,
        }
    if part.kind == "vision":
        return {
            qwen3_vl.Qwen3VLVisionModel: Qwen3Vision,
            qwen3_vl.Qwen3VLVisionBlock: VisionLayer,
            qwen3_vl.Qwen3VLVisionAttention: QWEN_VIT.Attention,
            qwen3_vl.Qwen3VLVisionMLP: VisionMlp,
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
    from .checkpoints import BUILDERS

    return BUILDERS
