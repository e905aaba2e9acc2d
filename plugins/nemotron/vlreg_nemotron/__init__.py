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

#: NemotronH's text model names its embedding ``embeddings`` and its final norm ``norm_f``.
def text_names(text: str) -> dict[str, str]:
    return {f"{text}.embeddings": "embed_tokens", f"{text}.norm_f": "norm"}


#: No ``model`` between the root and its parts: the text model is a causal LM of its own
#: (``language_model``, its ``lm_head`` the readout).
RENAME = {**text_names("language_model.model"), "language_model.lm_head": "lm_head",
          "vision_model.embeddings": "vision_model.patch_embed"}

#: The wrapper's own forward (the model root) writes the features into the embeddings.
SCATTER = Scatter("", "inputs_embeds_masked_scatter_0", 1)


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("nemotron_h_omni", text="language_model.model", vision="vision_model", projector="multi_modal_projector",
            rename=RENAME, entry=SCATTER, image_grids=lambda part: nemotron_image_grids(part.config)),
    # NemotronHForCausalLM: the text model at `model`
    Wrapper("nemotron_h", text="model", vision=None, projector=None, rename=text_names("model")),
    Text("nemotron_h", rename=text.rename, envoys=text.envoys),
    Tower("radio", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
