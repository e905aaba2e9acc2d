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

Ovis 2.5 (``ovis2_5``, ``Ovis2_5ForConditionalGeneration``, transformers 5.25) keeps the visual
vocabulary on another layout: a Qwen3 text model (vlreg-text's ``qwen3`` text part), a packed,
windowed tower at ``model.vision_tower`` and the projector at ``model.multi_modal_projector``
(the visual words' head, ``visual_tokenizer``, then the table), whose output ``model``'s first
``inputs_embeds.masked_scatter`` writes in, window by window (`ovis2_5`). The table's last four
rows are written over the boundary tokens around each image and video, by a lookup, not a
call. A video runs through the tower in a call of its own, after the image's, and is written
at the second ``_merge_visual_features`` (one tensor a video, joined in order), where
``vision.video_features`` is read; each frame is a temporal patch of its own, its tokens window
by window as an image's (`geometry.ovis2_5_video_grids`).

Ovis 2's tower and its names are in `vision`, the grids in `geometry`, the builder in `checkpoints`.
"""

from vlreg.plugin import Plugin, Scatter, Tower, Wrapper

from . import vision
from .geometry import image_grids, ovis2_5_image_grids, ovis2_5_video_grids

#: Ovis 2.5's ``model`` runs the tower (the image's call, then the video's), embeds the tokens,
#: then hands both to ``_merge_visual_features`` (the features one tensor per image or video),
#: which scatters them in: the image's first, the video's second.
OVIS2_5_SCATTER = Scatter(host="model", operation="self__merge_visual_features_0", argument=2,
                          videos="self__merge_visual_features_1",
                          order=("vision", "token_embeddings", "vision.image_features"))


def builders():
    from .checkpoints import build_ovis2, build_ovis2_5

    return {"ovis2": build_ovis2, "ovis2_5": build_ovis2_5}


plugin = Plugin(
    Wrapper("ovis2", projector="model.visual_embeddings_table", envoys=vision.wrapper_envoys,
            image_grids=lambda part: image_grids(part.config)),
    Tower("ovis2_vision", rename=vision.TOWER_RENAME, envoys=vision.envoys),
    Wrapper("ovis2_5", vision="model.vision_tower", projector="model.multi_modal_projector", entry=OVIS2_5_SCATTER,
            image_grids=lambda part: ovis2_5_image_grids(part.config),
            video_grids=lambda part: ovis2_5_video_grids(part.config)),
    Tower("ovis2_5_vision", rename=vision.OVIS2_5_RENAME, envoys=vision.ovis2_5_envoys),
    checkpoints=builders,
)
