"""HunYuan-VL's tower (``HunYuanVLVisionTransformer``): SigLIP's block names (``layer_norm1``,
``self_attn``, ``layer_norm2``, ``mlp``) over every image's patches packed in one
``[1, patches, hidden]`` row, each image's in raster order; no final norm.

* ``embeddings`` projects each patch with a convolution over that patch alone
  (`vision.patch_embeddings`) and adds the learned square grid of positions interpolated to
  each image's grid (joined by ``torch.concat``: `vision.position_embeddings`);
* each block's attention calls the attention function once per image over ``cu_seqlens``;
  its queries, keys and values are the ``transpose`` calls that end their preparation (no
  rotation in the tower);
* the merger (``patch_merger``, the projector) runs once per image inside the tower.
"""

from __future__ import annotations


from vlreg.plugin import (LearnedPositions, PerCall, PerImageAttention, RasterPackedVision, modeling_envoys,
                          tower_envoys)

RENAME = {"embeddings.patch_embedding": "patch_embed", "layer_norm1": "input_layernorm",
          "layer_norm2": "post_attention_layernorm"}


class HunYuanVLVision(LearnedPositions, RasterPackedVision):
    """The packed tower, its output ``[1, patches, hidden]`` (its batch along the patches)."""

    batch_axis = 1
    positions_module = "embeddings"
    positions_call = "torch_concat_0"
    max_aspect_ratio = 200  # the image processor's smart_resize, Qwen2-VL's


class HunYuanVLVisionAttention(PerImageAttention):
    """`PerImageAttention` where the queries, keys and values end in ``transpose`` calls."""

    queries_at, keys_at, values_at = "transpose_0", "transpose_1", "transpose_2"


class Merger(PerCall):
    """The merger, called once per image in the tower's loop: ``input`` and ``output`` are lists,
    image ``i``'s ``[1, patches, hidden]`` stream and its ``[1, tokens, text hidden]`` rows (the
    begin token, each row's tokens and newline, the end token)."""

    def calls(self, inputs: dict) -> int:
        grids = inputs.get("image_grid_thw")
        return 0 if grids is None else int(grids.shape[0])


envoys = tower_envoys(
    "hunyuan_vl", ("HunYuanVLVisionTransformer", "HunYuanVLVisionBlock", "HunYuanVLVisionAttention",
                   "HunYuanVLVisionMLP"),
    vision=HunYuanVLVision, attention=HunYuanVLVisionAttention)

wrapper_envoys = modeling_envoys("hunyuan_vl", {"HunYuanVLVisionPatchMerger": Merger})

#: HY-V4-VL's tower (``HYV4VLVisionModel``, transformers 5.25): HunYuan-VL's, its merger
#: (``patch_merger``) projecting straight to the text width and writing no begin or end token.
hy_v4_envoys = tower_envoys(
    "hy_v4_vl", ("HYV4VLVisionModel", "HYV4VLVisionBlock", "HYV4VLVisionAttention", "HYV4VLVisionMLP"),
    vision=HunYuanVLVision, attention=HunYuanVLVisionAttention)

hy_v4_wrapper_envoys = modeling_envoys("hy_v4_vl", {"HYV4VLVisionPatchMerger": Merger})
