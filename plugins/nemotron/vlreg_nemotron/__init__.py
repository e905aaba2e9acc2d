"""vlreg-nemotron: NemotronH Omni (``nemotron_h_omni``), declared against `vlreg.plugin`.

Three parts, all served here:

* the wrapper (`NemotronH_Omni_Reasoning_V3`): the text model at
  ``language_model.model``, the RADIO tower at ``vision_model``, the projector at
  ``multi_modal_projector``; the wrapper's own forward (the model root) runs the tower
  and writes the features into the embeddings (``inputs_embeds.masked_scatter``), so the
  scatter's host is the root (``Scatter("")``);
* the text model, ``nemotron_h``: hybrid blocks of one sublayer each (`text`);
* the tower, ``radio`` (`vision`), with its image grids (`geometry`).

A NemotronH language model on its own (``nemotron_h``, ``NemotronHForCausalLM``) loads
under the same names too, its config both the wrapper and the text part, so the Omni's
text model can be compared block by block with the model it came from. It has no vision
part, so no image enters it and its wrapper declares no entry.

No audio values: the audio tower (Parakeet) and its scatter are not served.
"""

from vlreg.plugin import Plugin, Scatter, Text, Tower, Wrapper

from . import text, vision
from .geometry import nemotron_image_grids

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

#: The wrapper's own forward (the model root) writes the features into the embeddings.
SCATTER = Scatter("", "inputs_embeds_masked_scatter_0", 1)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("nemotron_h_omni", rename=WRAPPER_RENAME, entry=SCATTER,
            image_grids=lambda part: nemotron_image_grids(part.config)),
    Wrapper("nemotron_h", rename=BASE_RENAME),
    Text("nemotron_h", rename=text.rename, envoys=text.envoys),
    Tower("radio", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
