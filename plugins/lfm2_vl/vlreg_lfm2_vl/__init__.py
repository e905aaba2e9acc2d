"""vlreg-lfm2-vl: LFM2-VL (``lfm2_vl``), declared against `vlreg.plugin`.

Three parts, all served here:

* the wrapper (``Lfm2VlForConditionalGeneration``): the text model at
  ``model.language_model``, the SigLIP 2 tower at ``model.vision_tower``, the projector at
  ``model.multi_modal_projector``, called once per crop (`tower.Projector`); ``model``'s
  forward writes the features into the embeddings with its one
  ``inputs_embeds.masked_scatter(mask, features)``;
* the text model, ``lfm2``: hybrid blocks of attention and short convolutions (`text`),
  the convolution a mixer kind this plugin declares (``short_conv``);
* the tower, ``siglip2_vision_model`` in its NaFlex form (`tower`), with its image grids
  (`geometry`).

LFM3-VL (``lfm3_vl``) is not served: its wrapper is Qwen2-VL's (a packed tower with
``image_grid_thw``, a Qwen3-VL processor), its tower mixes 2-D convolutions and attention,
and its text model (``lfm3``) is another block (sandwich norms, gated and sliding-window
attention); it needs a plugin of its own.
"""

from vlreg.plugin import Claim, Scatter, hookimpl

from . import text, tower

WRAPPERS = ("lfm2_vl",)

RENAME = {
    "model.language_model.layers": "layers",
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.embedding_norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}


@hookimpl
def vlreg_plugin_api():
    return 1


@hookimpl
def vlreg_claims():
    return [Claim("wrapper", model_type) for model_type in WRAPPERS] + [
        Claim(kind, model_type) for kind, module in (("text", text), ("vision", tower)) for model_type in module.MODEL_TYPES
    ]


@hookimpl
def vlreg_rename(part):
    return {"wrapper": RENAME, "text": text.RENAME, "vision": tower.RENAME}[part.kind]


@hookimpl
def vlreg_envoys(part):
    return {"wrapper": tower.wrapper_envoys, "text": text.envoys, "vision": tower.envoys}[part.kind]()


@hookimpl
def vlreg_scatter(part):
    return Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


@hookimpl
def vlreg_image_grids(part):
    from .geometry import image_grids

    return image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
