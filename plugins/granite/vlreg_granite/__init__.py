"""vlreg-granite: Granite-Docling and Granite 4 Vision (`wrappers`), declared against `vlreg.plugin`.

GraniteDoclingForConditionalGeneration is Idefics3's layout with the connector moved inside the
tower: the tower at ``model.vision_model`` (SigLIP's names, served through the ``"siglip"``
adapter vlreg-llava publishes), whose forward runs its blocks, ``post_layernorm``, then the
connector (``model.vision_model.connector``, the `projector`: a pixel shuffle of each tile's
patches, a projection, a fixed 2-D position grid, an MLP), which also projects the streams of
the blocks ``vision_config.deepstack_visual_indexes`` names (its DeepStack mergers); the
features are written into the embeddings by ``model``'s first ``inputs_embeds.masked_scatter``,
and the text model (``model.text_model``, Granite's shape) adds each DeepStack feature at the
image tokens after block ``k`` (`text`). Granite's µP multipliers:

* the text model multiplies the embeddings it is handed by ``embedding_multiplier``, after the
  scatter, so they are read where the text model is handed them (``Scatter.embeddings_to``);
* each block adds its sublayers' outputs times ``residual_multiplier``
  (`vlreg.plugin.ScaledResidualLayer`);
* the wrapper divides ``lm_head``'s output by ``text_config.logits_scaling`` (`READOUT`).

The connector runs inside the tower, so the tower's output takes no write (`READ_ONLY`); the
tiles and the thumbnail an image's tokens lie over are in `geometry`.
"""

import attrs

from vlreg.plugin import SCATTER, Plugin, Readout, Text, Tower, Wrapper, read_only

from . import text, vision, wrappers
from .geometry import granite4_grids, image_grids


def _divided(model, logits):
    return logits / model._module.config.get_text_config().logits_scaling


#: ``lm_head(norm(stream))`` divided by ``text_config.logits_scaling``, as the wrapper's forward does.
READOUT = Readout(after=_divided)

#: The connector runs inside the tower, after ``post_layernorm``: a write to the tower's output
#: reaches nothing (the same stream before the norm is the last block's output).
READ_ONLY = {
    "vision.tower_output": read_only(
        "the connector (model.projector) runs inside the tower and has read the stream before the tower returns "
        "it; edit vision.layers[-1].layer_output, the same stream before post_layernorm"
    )
}


def builders():
    from .checkpoints import build_granite4_vision, build_granite_docling

    return {"granite_docling": build_granite_docling, "granite4_vision": build_granite4_vision}


plugin = Plugin(
    Wrapper("granite_docling", text="model.text_model", vision="model.vision_model",
            projector="model.vision_model.connector", refuses=READ_ONLY, readout=READOUT,
            entry=attrs.evolve(SCATTER, embeddings_to="model.text_model"),
            image_grids=lambda part: image_grids(part.config)),
    Text("granite_docling_text", envoys=text.envoys),
    Tower("granite_docling_vision", rename=vision.RENAME, envoys=vision.envoys),
    # the CLIP tower is vlreg-llava's; the Q-Former in each projector (blip_2_qformer) is vlreg-blip's claim
    Wrapper("granite4_vision", projector="model.layerwise_projectors.0", entry=wrappers.ENTRY, readout=READOUT,
            refuses=wrappers.READ_ONLY, image_grids=lambda part: granite4_grids(part.config)),
    Text("granite4_vision_text", envoys=text.granite4_envoys),
    checkpoints=builders,
)
