"""vlreg-gemma3-example: Gemma 3 as a third-party vlreg plugin.

Written only against vlreg's public plugin API (`vlreg.plugin`, `vlreg.testing`),
the way a plugin from outside vlreg's repository would be.

Gemma3ForConditionalGeneration has three parts, and this plugin claims two:

* the ``gemma3`` wrapper: the text model at ``model.language_model``, the SigLIP tower
  at ``model.vision_tower``, and ``model.multi_modal_projector``, which average-pools
  the tower's patch grid, norms it and projects it to the text width; the result is
  written into the token embeddings by ``inputs_embeds.masked_scatter`` in
  ``Gemma3Model.forward``;
* the ``gemma3_text`` text model (`blocks`): sandwich-normed blocks;
* the ``siglip_vision_model`` tower is not claimed: vlreg-llava serves it, and any
  wrapper whose ``vision_config`` is SigLIP gets that adapter.
"""

from vlreg.plugin import Claim, Scatter, hookimpl

from .blocks import text_envoys

#: Standard mounts, from the model root.
WRAPPER_RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

#: The one masked_scatter in Gemma3Model.forward; the projected features are its
#: second argument.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "gemma3"), Claim("text", "gemma3_text")]


@hookimpl
def vlreg_rename(part):
    return WRAPPER_RENAME if part.kind == "wrapper" else None


@hookimpl
def vlreg_envoys(part):
    return text_envoys() if part.kind == "text" else None


@hookimpl
def vlreg_scatter(part):
    return SCATTER


@hookimpl
def vlreg_image_grids(part):
    from .geometry import image_grids

    return image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import build_gemma3

    return {"gemma3": build_gemma3}
