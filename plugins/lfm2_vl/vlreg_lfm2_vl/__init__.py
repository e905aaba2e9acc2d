"""vlreg-lfm2-vl: LFM2-VL (``lfm2_vl``), declared against `vlreg.plugin`.

Three parts, all served here:

* the wrapper (``Lfm2VlForConditionalGeneration``): the text model at
  ``model.language_model``, the SigLIP 2 tower at ``model.vision_tower``, the projector at
  ``model.multi_modal_projector``, called once per crop before transformers 5.24, once on
  every crop's slots packed from it (`vision.PER_CROP`); ``model``'s
  forward writes the features into the embeddings with its one
  ``inputs_embeds.masked_scatter(mask, features)``;
* the text model, ``lfm2``: hybrid blocks of attention and short convolutions (`text`),
  the convolution a mixer kind this plugin declares (``short_conv``);
* the tower, ``siglip2_vision_model`` in its NaFlex form (`vision`), with its image grids
  (`geometry`).

LFM3-VL (``lfm3_vl``) is not served: its wrapper is Qwen2-VL's (a packed tower with
``image_grid_thw``, a Qwen3-VL processor), its tower mixes 2-D convolutions and attention,
and its text model (``lfm3``) is another block (sandwich norms, gated and sliding-window
attention); it needs a plugin of its own.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import image_grids

#: LFM2's final norm is its ``embedding_norm``; the rest is transformers' layout.
RENAME = {"model.language_model.embedding_norm": "norm"}


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("lfm2_vl", rename=RENAME, envoys=vision.wrapper_envoys, image_grids=lambda part: image_grids(part.config)),
    Text("lfm2", rename=text.RENAME, envoys=text.envoys),
    Tower("siglip2_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
