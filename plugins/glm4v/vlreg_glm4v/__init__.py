"""vlreg-glm4v: the GLM-V line, declared against `vlreg.plugin`.

Five wrappers share Qwen2-VL's layout (the text model at ``model.language_model``, the
tower at ``model.visual`` with its merger, the ``masked_scatter`` in ``model``'s forward,
images resized whole into 2 x 2 blocks of 14-pixel patches), so the mounts, the scatter,
the image grids and the tower's attention come from the ``"qwen_vit"`` adapter that
vlreg-qwen2-vl publishes:

* ``glm4v`` (GLM-4.1V): sandwich-normed text blocks (`text`), the tower with learned
  positions and a downsampling convolution (`vision`);
* ``glm4v_moe`` (GLM-4.5V): plain pre-norm blocks, dense then routed by a sigmoid group
  router beside a shared expert (`GlmMoe`); GLM-4.1V's tower;
* ``glm46v`` (GLM-4.6V) and ``glmga``: GLM-4.1V's classes with parts chosen by their model
  types (``glm4v_text`` or ``glm4v_moe_text``; ``glm4v_vision``), each part served as above;
* ``glm_ocr`` (GLM-OCR): GLM-4.1V's text block; a tower without learned positions whose
  attention norms its queries and keys.

Videos are not served, and the wrappers' claims refuse them (``videos``, and the row
``vision.video_features``) saying why, so `vlreg plugins --coverage` marks each partial: GLM writes a
video's frames with the image's own placeholder (``<|image|>``; only the processor's
``mm_token_type_ids`` tell them apart), and vlreg finds a prompt's image tokens as
``input_ids == image_token_id``, so on a prompt that carries a video those tokens include
the video's: trace a video's frames as images (``images=[...]``).
"""

from importlib import import_module

from vlreg.plugin import Attention, Claim, Layer, Mlp, VisionLayer, VisionMlp, adapter, hookimpl

from .text import GlmMoe, SandwichAttention, SandwichMlp
from .vision import NO_VIDEOS, Glm4vVision, GlmVision

QWEN_VIT = adapter("qwen_vit")

WRAPPERS = ("glm4v", "glm4v_moe", "glm46v", "glmga", "glm_ocr")

#: text model type -> (transformers module, class-name prefix)
TEXTS = {"glm4v_text": ("glm4v", "Glm4vText"), "glm4v_moe_text": ("glm4v_moe", "Glm4vMoeText"),
         "glm_ocr_text": ("glm_ocr", "GlmOcrText")}
#: tower model type -> (transformers module, class-name prefix, its MLP's class name, envoy)
TOWERS = {
    "glm4v_vision": ("glm4v", "Glm4vVision", "Glm4VisionMlp", Glm4vVision),
    "glm4v_moe_vision": ("glm4v_moe", "Glm4vMoeVision", "Glm4vMoeisionMlp", Glm4vVision),
    "glm_ocr_vision": ("glm_ocr", "GlmOcrVision", "GlmOcrVisionMlp", GlmVision),
}


def _modeling(name: str):
    return import_module(f"transformers.models.{name}.modeling_{name}")


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    refuses = {"videos": NO_VIDEOS, "vision.video_features": NO_VIDEOS}
    return [Claim("wrapper", name, refuses=refuses) for name in WRAPPERS] + [Claim("text", name) for name in TEXTS] + [
        Claim("vision", name) for name in TOWERS
    ]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": QWEN_VIT.wrapper_rename, "vision": QWEN_VIT.tower_rename}.get(part.kind)


@hookimpl
def vlreg_envoys(part):
    if part.kind == "text":
        module, prefix = TEXTS[part.model_type]
        modeling = _modeling(module)
        if part.model_type == "glm4v_moe_text":
            return {modeling.Glm4vMoeTextDecoderLayer: Layer, modeling.Glm4vMoeTextAttention: Attention,
                    modeling.Glm4vMoeTextMLP: Mlp, modeling.Glm4vMoeTextMoE: GlmMoe}
        return {getattr(modeling, f"{prefix}DecoderLayer"): Layer,
                getattr(modeling, f"{prefix}Attention"): SandwichAttention,
                getattr(modeling, f"{prefix}MLP"): SandwichMlp}
    if part.kind == "vision":
        module, prefix, mlp, tower = TOWERS[part.model_type]
        modeling = _modeling(module)
        return {getattr(modeling, f"{prefix}Model"): tower, getattr(modeling, f"{prefix}Block"): VisionLayer,
                getattr(modeling, f"{prefix}Attention"): QWEN_VIT.Attention, getattr(modeling, mlp): VisionMlp}
    return None


@hookimpl
def vlreg_scatter(part):
    return QWEN_VIT.scatter


@hookimpl
def vlreg_image_grids(part):
    return QWEN_VIT.image_grids


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
