"""PaddleOCR-VL's tower (``PaddleOCRVisionTransformer``, at ``model.visual.vision_model``):
SigLIP's blocks over every image's patches packed in one ``[patches, hidden]`` row, each
image's patches in raster order.

* ``embeddings`` projects each patch with a convolution over that patch alone
  (`vision.patch_embeddings`) and adds the learned square grid of positions, bilinearly
  resampled to the image's grid (``pos_embeds``, `vision.position_embeddings`); block 0
  receives the sum;
* each block's attention rotates queries and keys by each patch's row and column, then calls
  the attention function once per image (`vlreg.plugin.PerImageAttention`);
* ``post_layernorm`` ends the tower (`vision.tower_output`); the projector outside it reads it.
"""

from vlreg.plugin import PACKED_SIGLIP_RENAME, LearnedPositions, PerImageAttention, RasterPackedVision, tower_envoys

RENAME = PACKED_SIGLIP_RENAME


class PaddleOCRVision(LearnedPositions, RasterPackedVision):
    """The packed SigLIP tower, its positions resampled per image in ``embeddings``."""

    positions_module = "embeddings"
    positions_call = "pos_embeds_to_0"
    max_aspect_ratio = 200  # the image processor's smart_resize, Qwen2-VL's


envoys = tower_envoys(
    "paddleocr_vl",
    ("PaddleOCRVisionTransformer", "PaddleOCRVisionEncoderLayer", "PaddleOCRVisionAttention", "PaddleOCRVisionMLP"),
    vision=PaddleOCRVision, attention=PerImageAttention)
