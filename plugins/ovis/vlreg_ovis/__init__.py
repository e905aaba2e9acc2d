"""vlreg-ovis: Ovis 2 (``ovis2``, ``Ovis2ForConditionalGeneration``), declared against `vlreg.plugin`.

The wrapper is transformers' composite layout: the text model at ``model.language_model`` (a
Qwen2, served by vlreg-llava's ``qwen2`` text part), the tower at ``model.vision_tower``, and
``model``'s first ``inputs_embeds.masked_scatter`` writing the image features in. What
differs is the projector, ``model.visual_embeddings_table``: a *visual vocabulary*. The tower
folds each ``hidden_stride`` x ``hidden_stride`` block of patches into one token, maps it to
logits over the visual words (``head_linear``, ``head_norm``) and a softmax into a
distribution, `vision.OvisVision.visual_words`; the table's rows weighted by that
distribution are the features. The table is called a second time, on the ids of its last
rows, for the structure tokens the processor writes around each image (``<IMG_START>``,
``<IMG_GRID>``, ``<IMG_COL>``, ``<IMG_ROW>``, ``<IMG_END>``), which the forward writes over
those tokens' embeddings after the scatter: they are not image tokens, so no image value
covers them.

The tower and its names are in `vision`, the grids in `geometry`, the builder in `checkpoints`.
"""

from vlreg.plugin import Plugin, Tower, Wrapper

from . import vision
from .geometry import image_grids


def builders():
    from .checkpoints import build_ovis2

    return {"ovis2": build_ovis2}


plugin = Plugin(
    Wrapper("ovis2", projector="model.visual_embeddings_table", envoys=vision.wrapper_envoys,
            image_grids=lambda part: image_grids(part.config)),
    Tower("ovis2_vision", rename=vision.TOWER_RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
