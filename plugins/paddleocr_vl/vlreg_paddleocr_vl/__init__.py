"""vlreg-paddleocr-vl: PaddleOCR-VL, declared against `vlreg.plugin`.

PaddleOCRVLForConditionalGeneration holds the text model at ``model.language_model``
(``paddleocr_vl_text``: ERNIE 4.5's dense Llama-shaped blocks under M-RoPE), the tower one
level down at ``model.visual.vision_model`` (SigLIP's names over every image's patches packed
in one ``[patches, hidden]`` row, in raster order, one attention call per image on 2-D rotary
positions, a learned position grid resampled to each image: `vlreg.plugin.RasterPackedVision`,
`PerImageAttention`, `LearnedPositions`), and the projector at ``model.projector`` (per image a
norm, a 2 x 2 merge of its raster patches, two linear maps), whose output ``model``'s first
``inputs_embeds.masked_scatter`` writes into the embeddings.

An image token is a 2 x 2 block of patches, tokens in raster order: the image grids are the
adapter ``"qwen_vit"``'s over ``image_grid_thw``. The model reads no videos (its processor has
no video processor, so ``videos=`` is refused before the model runs).
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

def builders():
    from .checkpoints import build_paddleocr_vl

    return {"paddleocr_vl": build_paddleocr_vl}


plugin = Plugin(
    Wrapper("paddleocr_vl", vision="model.visual.vision_model", projector="model.projector",
            image_grids=lambda part: adapter("qwen_vit").image_grids),
    Text("paddleocr_vl_text", envoys=text.envoys),
    Tower("paddleocr_vl_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
