"""vlreg-blip: BLIP-2 and InstructBLIP, declared against `vlreg.plugin`.

The image reaches the text model as learned queries (`vlreg.plugin.QueryTokens`): a ViT
tower, a Q-Former whose queries cross-attend to the tower's rows, a linear projector, and
the projected queries scattered at the prompt's ``<image>`` tokens, ``num_query_tokens``
of them an image. Three kinds of part, each from its own module:

* the wrappers (`wrappers`): ``blip-2`` (Blip2ForConditionalGeneration) and
  ``instructblip`` (InstructBlipForConditionalGeneration, whose Q-Former also reads the
  instruction);
* the towers and their Q-Formers (`towers`): ``blip_2_vision_model`` and
  ``instructblip_vision_model``; the Q-Former's config (``blip_2_qformer``,
  ``instructblip_qformer``) is the wrapper's ``qformer_config``, no part of its own, and its
  modules are declared with the tower's;
* the OPT text model (`opt`), BLIP-2's. InstructBLIP-Vicuna's Llama is vlreg-llava's.

`geometry` declares the query tokens' boxes (each the whole image); `checkpoints` builds
tiny checkpoints for tests.
"""

from vlreg.plugin import Claim, QueryTokens, hookimpl

from . import opt, towers, wrappers

PARTS = {"wrapper": wrappers, "text": opt, "vision": towers}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim(kind, model_type) for kind, module in PARTS.items() for model_type in module.MODEL_TYPES]


@hookimpl
def vlreg_refusal(part):
    return wrappers.refusal(part) if part.kind == "wrapper" else None


@hookimpl
def vlreg_rename(part):
    return PARTS[part.kind].rename(part)


@hookimpl
def vlreg_envoys(part):
    return None if part.kind == "wrapper" else PARTS[part.kind].envoys(part)


@hookimpl
def vlreg_scatter(part):
    return wrappers.scatter(part)


@hookimpl
def vlreg_image_grids(part):
    return QueryTokens.query_grids(part.config.num_query_tokens)


@hookimpl
def vlreg_checkpoints():
    from . import checkpoints

    return checkpoints.BUILDERS
