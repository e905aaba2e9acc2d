"""vlreg-molmo: Molmo 2, declared against `vlreg.plugin`.

Molmo2ForConditionalGeneration is LLaVA's layout: the text model at ``model.language_model``
(``molmo2_text``: `text`), the tower at ``model.vision_tower`` (``molmo2_vision``: `vision`) and
the projector at ``model.multi_modal_projector`` (``Molmo2Adapter``, its config
``adapter_config``: each image token a cross-attention pooling of a window of patches, then an
MLP).

The image enters *additively*: ``model``'s first ``inputs_embeds.masked_scatter`` writes
``embeddings[mask] + features`` at the ``<im_patch>`` placeholders, so ``vision.image_features``
is the added part, read where the forward flattens it for the add (``image_features_reshape_0``),
and block 0 receives the placeholders' embeddings plus it (`vlreg.plugin.Scatter`'s
``added``). The text mask lets every image token attend to every other (the processor's
``mm_token_type_ids``), causal elsewhere.

Each image is a low-resolution view and a canvas of overlapping crops (`geometry`). A video is
written at the image's placeholder, so its frames would be its images: the family serves no
video values.
"""

from vlreg.plugin import Other, Plugin, Scatter, Text, Tower, Wrapper

from . import text, vision
from .geometry import molmo2_image_grids

#: The added features, read where ``model``'s forward flattens them for the scatter's add.
ENTRY = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", added="image_features_reshape_0")


def builders():
    from .checkpoints import build_molmo2

    return {"molmo2": build_molmo2}


plugin = Plugin(
    Wrapper("molmo2", entry=ENTRY, refuses=vision.READ_ONLY, image_grids=lambda part: molmo2_image_grids),
    Text("molmo2_text", envoys=text.envoys),
    Tower("molmo2_vision", rename=vision.RENAME, envoys=vision.envoys),
    Other("molmo2_adapter", field="adapter_config"),
    checkpoints=builders,
)
