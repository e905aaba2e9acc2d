"""vlreg-cohere: Aya Vision and Command A Vision, declared against `vlreg.plugin`.

Two kinds of part, each from its own module:

* the wrappers (`wrappers`): ``aya_vision`` (AyaVisionForConditionalGeneration) and
  ``cohere2_vision`` (Cohere2VisionForConditionalGeneration, Command A Vision);
* the text model (`text`): ``cohere2``, the Command R7B / Command A text model both pair,
  whose blocks are parallel (attention and MLP read the same normed input).

Both towers are SigLIP's (``siglip_vision_model``), served by vlreg-llava's claim with
nothing imported from it. `geometry` declares each image's tiles and thumbnail, the
tower's patches folded 2 x 2 into tokens by the projector's pixel shuffle;
`checkpoints` builds tiny checkpoints for tests.
"""

from vlreg.plugin import Claim, hookimpl

from . import text, wrappers

PARTS = {"wrapper": wrappers, "text": text}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim(kind, model_type) for kind, module in PARTS.items() for model_type in module.MODEL_TYPES]


@hookimpl
def vlreg_rename(part):
    return PARTS[part.kind].rename(part)


@hookimpl
def vlreg_envoys(part):
    return PARTS[part.kind].envoys(part)


@hookimpl
def vlreg_scatter(part):
    return wrappers.SCATTER


@hookimpl
def vlreg_read_only(part):
    return wrappers.read_only(part) if part.kind == "wrapper" else None


@hookimpl
def vlreg_image_grids(part):
    from .geometry import image_grids

    return image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from . import checkpoints

    return checkpoints.BUILDERS
