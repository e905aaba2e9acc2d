"""vlreg-nemotron: NemotronH Omni (``nemotron_h_omni``), declared against `vlreg.plugin`.

Three parts, all served here:

* the wrapper (`NemotronH_Omni_Reasoning_V3`): the text model at
  ``language_model.model``, the RADIO tower at ``vision_model``, the projector at
  ``multi_modal_projector``; the wrapper's own forward (the model root) runs the tower
  and writes the features into the embeddings (``inputs_embeds.masked_scatter``), so the
  scatter's host is the root (``Scatter("")``);
* the text model, ``nemotron_h``: hybrid blocks of one sublayer each (`text`);
* the tower, ``radio`` (`tower`), with its image grids (`geometry`).

A NemotronH language model on its own (``nemotron_h``, ``NemotronHForCausalLM``) loads
under the same names too, its config both the wrapper and the text part, so the Omni's
text model can be compared block by block with the model it came from.

No audio values: the audio tower (Parakeet) and its scatter are not served.
"""

from vlreg.plugin import Claim, Scatter, hookimpl

from . import text, tower
from .geometry import nemotron_image_grids

WRAPPERS = ("nemotron_h_omni", "nemotron_h")

WRAPPER_RENAME = {
    "language_model.model.layers": "layers",
    "language_model.model.embeddings": "embed_tokens",
    "language_model.model.norm_f": "norm",
    "language_model.lm_head": "lm_head",
    "vision_model": "vision",
    "vision_model.embeddings": "vision_model.patch_embed",
    "multi_modal_projector": "projector",
}
#: ``NemotronHForCausalLM``: the text model at ``model``.
BASE_RENAME = {"model.layers": "layers", "model.embeddings": "embed_tokens", "model.norm_f": "norm"}


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
    if part.kind == "wrapper":
        return BASE_RENAME if part.model_type == "nemotron_h" else WRAPPER_RENAME
    if part.kind == "text":
        return text.rename(part.config)
    return tower.RENAME


@hookimpl
def vlreg_envoys(part):
    if part.kind in ("text", "vision"):
        return (text if part.kind == "text" else tower).envoys()
    return None


@hookimpl
def vlreg_scatter(part):
    return Scatter("", "inputs_embeds_masked_scatter_0", 1)


@hookimpl
def vlreg_image_grids(part):
    return nemotron_image_grids(part.config)


@hookimpl
def vlreg_checkpoints():
    from .checkpoints import BUILDERS

    return BUILDERS
