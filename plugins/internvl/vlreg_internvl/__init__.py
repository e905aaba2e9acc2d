"""vlreg-internvl: InternVL, declared against `vlreg.plugin`.

Three kinds of part, each from its own module:

* the wrapper (`wrappers`): ``internvl`` (InternVLForConditionalGeneration);
* the tower (`tower`): ``internvl_vision``, the InternViT, with its class token and
  layer-scaled blocks;
* the text model (`texts`): ``qwen3``, InternVL3.5's. InternVL3's ``qwen2`` is served by
  vlreg-llava's claim, with nothing imported from it.

`geometry` declares each image's tiles and thumbnail, the tower's patches folded 2 x 2
into tokens by the pixel shuffle; `checkpoints` builds tiny checkpoints for tests.
"""

from vlreg.plugin import Claim, hookimpl

from . import texts, tower, wrappers

PARTS = {"wrapper": wrappers, "text": texts, "vision": tower}


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
    from .geometry import internvl_image_grids

    return internvl_image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from . import checkpoints

    return checkpoints.BUILDERS
