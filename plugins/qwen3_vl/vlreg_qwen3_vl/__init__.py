"""vlreg-qwen3-vl: the Qwen3 line, declared against `vlreg.plugin`.

Four families share one layout, Qwen2-VL's (the text model at ``model.language_model``,
the Qwen ViT at ``model.visual`` with its merger, the ``masked_scatter`` in ``model``'s
forward), so the mounts, the tower's names, the scatter and the tower's attention come
from the ``"qwen_vit"`` adapter vlreg-qwen2-vl publishes:

* ``qwen3_vl``: learned tower positions and DeepStack (`vision`, `text`);
* ``qwen3_vl_moe``: the same, its MLPs routing each token to experts (`MoeMlp`);
* ``qwen3_5``: learned tower positions; text blocks that mix tokens either by gated
  full attention or by a gated delta net (`linear`), as ``layer_types`` says;
* ``qwen3_5_moe``: Qwen3.5 with routed MLPs and a shared expert;
* ``cosmos3_omni`` (Cosmos3OmniForConditionalGeneration): a wrapper whose model classes are
  Qwen3-VL's line for line, over a ``qwen3_vl_text`` text model and a ``qwen3_vl_vision``
  tower (its config forces that model type), so only the wrapper is new.

The text and vision parts are looked up by their own ``model_type`` (``qwen3_5_text``,
``qwen3_vl_vision``), never the checkpoint's: another wrapper, here or in another plugin,
that hosts one of these parts gets the same envoys.
"""

from importlib import import_module

from vlreg.plugin import (
    Attention,
    Claim,
    Layer,
    LinearAttention,
    Mlp,
    MoeMlp,
    VisionLayer,
    VisionMlp,
    adapter,
    hookimpl,
)

from .text import DeepStackLayer, GatedAttention
from .vision import Qwen3Vision

QWEN_VIT = adapter("qwen_vit")

#: family -> (its transformers module, class-name prefix of its text and vision classes)
FAMILIES = {
    "qwen3_vl": ("qwen3_vl", "Qwen3VLText", "Qwen3VLVision"),
    "qwen3_vl_moe": ("qwen3_vl_moe", "Qwen3VLMoeText", "Qwen3VLMoeVision"),
    "qwen3_5": ("qwen3_5", "Qwen3_5", "Qwen3_5Vision"),
    "qwen3_5_moe": ("qwen3_5_moe", "Qwen3_5Moe", "Qwen3_5MoeVision"),
}

#: Wrappers with Qwen3-VL's layout whose parts are one of `FAMILIES`' (claimed as wrappers only).
HOSTS = ("cosmos3_omni",)

#: A text-generation load of a Qwen3.5 checkpoint is transformers' text-only
#: ``Qwen3_5ForCausalLM`` (the text model at ``model``): its mounts, beside the wrapper's.
TEXT_ONLY_RENAME = {"model.layers": "layers", "model.embed_tokens": "embed_tokens", "model.norm": "norm"}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [
        Claim(kind, f"{family}{suffix}")
        for family in FAMILIES
        for kind, suffix in (("wrapper", ""), ("text", "_text"), ("vision", "_vision"))
    ] + [Claim("wrapper", host) for host in HOSTS]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": {**QWEN_VIT.wrapper_rename, **TEXT_ONLY_RENAME}, "vision": QWEN_VIT.tower_rename}.get(part.kind)


def _family(part) -> tuple:
    """The transformers module and class prefixes of a text or vision part, from the part's
    own model type (``qwen3_5_text`` is Qwen3.5's, whichever wrapper hosts it)."""
    family = part.model_type.removesuffix(f"_{part.kind}")
    module, text, vision = FAMILIES[family]
    return import_module(f"transformers.models.{module}.modeling_{module}"), text, vision


@hookimpl
def vlreg_envoys(part):
    if part.kind == "wrapper":
        return None
    modeling, text, vision = _family(part)
    if part.kind == "text":
        hybrid = hasattr(modeling, f"{text}GatedDeltaNet")  # Qwen3.5: linear and full blocks
        found = {
            getattr(modeling, f"{text}DecoderLayer"): Layer if hybrid else DeepStackLayer,
            getattr(modeling, f"{text}Attention"): GatedAttention if hybrid else Attention,
        }
        if hybrid:
            found[getattr(modeling, f"{text}GatedDeltaNet")] = LinearAttention
        found[getattr(modeling, f"{text}MLP")] = Mlp  # dense blocks (mlp_only_layers), or the shared expert
        sparse = getattr(modeling, f"{text}SparseMoeBlock", None)
        if sparse is not None:
            found[sparse] = MoeMlp
        return found
    if part.kind == "vision":
        return {
            getattr(modeling, f"{vision}Model"): Qwen3Vision,
            getattr(modeling, f"{vision}Block"): VisionLayer,
            getattr(modeling, f"{vision}Attention"): QWEN_VIT.Attention,
            getattr(modeling, f"{vision}MLP"): VisionMlp,
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
