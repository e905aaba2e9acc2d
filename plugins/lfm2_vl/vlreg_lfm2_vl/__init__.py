"""vlreg-lfm2-vl: LFM2-VL (``lfm2_vl``) and LFM3-VL (``lfm3_vl``), declared against `vlreg.plugin`.

LFM2-VL, three parts:

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

LFM3-VL, three more:

* the wrapper (``Lfm3VlForConditionalGeneration``): the same mounts, the processor and image
  grids Qwen2-VL's (vlreg-qwen2-vl's adapter ``"qwen_vit"``: ``image_grid_thw``), an image's
  features written by ``model``'s first ``inputs_embeds.masked_scatter``, a video's by its
  second (`VIDEO_SCATTER`; a video's frames run through the tower in a call of their own);
* the text model, ``lfm3`` (`text`): LFM2's blocks with each sublayer's output normed
  and the attention's heads gated;
* the tower, ``lfm3_vl_vision`` (`vision`): LFM2-shaped blocks, attention or a 2-D
  short convolution, over the Qwen ViT's packed patches.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision
from .geometry import image_grids

#: LFM2's final norm is its ``embedding_norm``; the rest is transformers' layout.
RENAME = {"model.language_model.embedding_norm": "norm"}

#: The time Qwen3-VL's processor, and so LFM3-VL's, writes before each temporal patch of a video.
SECONDS = r"<(\d+(?:\.\d+)?) seconds>"


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


def _qwen_vit():
    return adapter("qwen_vit")


plugin = Plugin(
    Wrapper("lfm2_vl", rename=RENAME, envoys=vision.wrapper_envoys, image_grids=lambda part: image_grids(part.config)),
    Wrapper("lfm3_vl", rename=RENAME, entry=VIDEO_SCATTER, image_grids=lambda part: _qwen_vit().image_grids,
            video_grids=lambda part: _qwen_vit().video_grids(SECONDS)),
    Text("lfm2", rename=text.RENAME, envoys=text.envoys),
    Text("lfm3", rename=text.RENAME, envoys=text.lfm3_envoys),
    Tower("siglip2_vision_model", rename=vision.RENAME, envoys=vision.envoys),
    Tower("lfm3_vl_vision", envoys=vision.lfm3_envoys),
    checkpoints=builders,
)
