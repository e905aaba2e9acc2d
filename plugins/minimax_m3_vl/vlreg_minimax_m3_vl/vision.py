"""MiniMax-M3-VL's tower (``MiniMaxM3VLVisionModel``): SigLIP's block names (``layer_norm1``,
``self_attn``, ``layer_norm2``, ``mlp``) over every image's patches packed in one
``[1, patches, hidden]`` row, in the image processor's merge-block order (Qwen2-VL's).

* ``embeddings`` projects each patch (a convolution over the patch's two frames:
  `vision.patch_embeddings`, ``[patches, hidden]``); no learned positions: the attention rotates
  queries and keys by each patch's frame, row and column;
* ``pre_layrnorm`` (sic) norms the patches before block 0;
* each block's attention calls the attention function once per image over ``cu_seqlens``
  (`vlreg.plugin.PerImageAttention` at its default locations, after the rotation);
* no final norm: the last block's stream is `vision.tower_output`, which the projector outside
  the tower reads, so it takes a write.
"""

from vlreg.plugin import PackedVision, PerImageAttention, tower_envoys

#: The tower's names onto the standard ones: the embeddings module is the patch embedding (its
#: convolution's output is 5-D, the module's a row a patch).
RENAME = {"embeddings": "patch_embed", "layer_norm1": "input_layernorm", "layer_norm2": "post_attention_layernorm"}


class MiniMaxM3VLVision(PackedVision):
    """The packed tower, its output ``[1, patches, hidden]`` (its batch along the patches)."""

    batch_axis = 1
    max_aspect_ratio = 200  # the image processor's smart_resize, Qwen2-VL's


envoys = tower_envoys(
    "minimax_m3_vl",
    ("MiniMaxM3VLVisionModel", "MiniMaxM3VLVisionEncoderLayer", "MiniMaxM3VLVisionAttention", "MiniMaxM3VLVisionMLP"),
    vision=MiniMaxM3VLVision, attention=PerImageAttention)
