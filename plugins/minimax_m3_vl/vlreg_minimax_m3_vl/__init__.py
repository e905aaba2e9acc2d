"""vlreg-minimax-m3-vl: MiniMax-M3-VL, declared against `vlreg.plugin`.

MiniMaxM3SparseForConditionalGeneration (the class name has no ``VL``) keeps LLaVA's layout:
the tower at ``model.vision_tower`` (``minimax_m3_vl_vision``: SigLIP's block names over every
image's patches packed in one ``[1, patches, hidden]`` row, one attention call per image on
2-D rotary positions; `vision`), the projector at ``model.multi_modal_projector`` (two linear
maps per patch, then two over each 2 x 2 block of patches: an image token) and the text model
at ``model.language_model`` (``minimax_m3_vl_text``: sparse-attention blocks and sigmoid-routed
experts; `text`). ``model``'s first ``inputs_embeds.masked_scatter`` writes the image tokens
into the embeddings.

The image processor is Qwen2-VL's (14-pixel patches, 2 x 2 a token, merge-block order): the
image grids are the adapter ``"qwen_vit"``'s over ``image_grid_thw``. Videos run through the
same tower in a call of their own and are written at a second scatter (`VIDEO_SCATTER`), where
``vision.video_features`` is read; their grids are the adapter's too.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

def builders():
    from .checkpoints import build_minimax_m3_vl

    return {"minimax_m3_vl": build_minimax_m3_vl}


plugin = Plugin(
    Wrapper("minimax_m3_vl", entry=VIDEO_SCATTER, image_grids=lambda part: adapter("qwen_vit").image_grids,
            video_grids=lambda part: adapter("qwen_vit").video_grids()),
    Text("minimax_m3_vl_text", envoys=text.envoys, refuses=text.INDEXER_REFUSED),
    Tower("minimax_m3_vl_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
