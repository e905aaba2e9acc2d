"""Cosmos3 Edge's tower (``Cosmos3EdgeVisionModel``): SigLIP 2's blocks over every image's
patches packed in one ``[patches, hidden]`` row, in merge-block order.

* ``embeddings`` projects each patch (a linear map: `vision.patch_embeddings`) and adds the
  learned square grid of positions resized to each image's grid of patches
  (``resize_positional_embeddings``, `vision.position_embeddings`); block 0 receives the sum;
* each block's attention calls the attention function once per image over ``cu_seqlens``
  (`vlreg.plugin.PerImageAttention` at its default locations);
* ``post_layernorm`` ends the tower (`vision.tower_output`); the projector outside the tower
  reads it, so the tower's output takes a write.
"""

from vlreg.plugin import PACKED_SIGLIP_RENAME, LearnedPositions, PackedVision, PerImageAttention, tower_envoys

RENAME = PACKED_SIGLIP_RENAME


class Cosmos3EdgeVision(LearnedPositions, PackedVision):
    """The packed SigLIP 2 tower, its positions resized per image in ``embeddings``."""

    positions_module = "embeddings"
    positions_call = "self_resize_positional_embeddings_0"
    max_aspect_ratio = 200  # the image processor's smart_resize, Qwen2-VL's


envoys = tower_envoys(
    "cosmos3_edge",
    ("Cosmos3EdgeVisionModel", "Cosmos3EdgeVisionEncoderLayer", "Cosmos3EdgeVisionAttention", "Cosmos3EdgeMLP"),
    vision=Cosmos3EdgeVision, attention=PerImageAttention)
