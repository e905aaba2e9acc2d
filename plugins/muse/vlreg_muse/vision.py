"""Muse's tower (``muse_glimmer_vision``, ``MuseGlimmerVisionModel``; Muse Spark's ``muse_spark_vision`` is
the same) under the standard names.

Kimi K2.5's blocks (``layers``: ``norm1``, ``attn``, ``norm2``, ``mlp``; the attention reads of
the adapter ``"kimi_vit"``), run in windows as Qwen2.5-VL's are. The tower holds every image's
patches packed in one row, ``[patches, hidden]``, each image's in raster order (the processor
cuts it row by row), and runs:

* ``patch_embedder``: a linear map of each patch (``patch_embedding``, served as
  ``patch_embeddings``) plus a learned 2-D grid of positions resampled to the image
  (bilinear; served as ``position_embeddings``, what is added);
* ``ln_pre``, then the regrouping of the row into *window order*: square windows of
  ``pos_emb_height`` patches a side (``window_size`` pixels), cut short at the right and
  bottom edges, windows in raster order, patches in raster order inside each
  (vlreg-qwen2-5-vl's `window_layout` with no merge); so ``layers[0].input`` is
  ``ln_pre(patch_embeddings + position_embeddings)`` regrouped;
* the blocks, in window order: a ``"window_attention"`` block (``layer_types``) attends within
  each window, a ``"full_attention"`` one within each image, calling the attention function
  once per window or image (``self_attn.inputs[1]["cu_seqlens"]``);
* the regrouping undone, then ``ln_post``, whose output is ``tower_output`` (raster order);
  then ``pixel_shuffle`` gathers each ``merge_size`` square of patches into one token
  (channels interleaved), which the projector (``model.vision_adapter``) reads.

`MuseVision.to_scatter_order` puts a block's rows (window order) in the tokens' order, each
token's square of patches together, as the Qwen ViT holds them, so the helpers that fold
patches onto tokens read the tower as they read a Qwen one.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from vlreg.plugin import (LearnedPositions, VisionLayer, VisionMlp, adapter, as_patches, config_size, modeling_envoys,
                          patches, value)
from vlreg_qwen2_5_vl import window_layout

KIMI_VIT = adapter("kimi_vit")


class MuseVision(LearnedPositions, adapter("qwen_vit").Vision):
    """The Muse tower: packed rows, learned positions, Kimi's blocks in windows."""

    positions_module: ClassVar[str] = "patch_embedder"
    positions_call: ClassVar[str] = "pos_embeds_to_0"
    positions_add_to_patches: ClassVar[bool] = False  # ln_pre and the window regrouping come between

    patch_embeddings = value(
        lambda vision: f"{vision.patch_embedder.patch_embedding.path}.output",
        description="the patch embedding's output (a linear map of each patch, before the positions), one row per "
                    "patch, raster order",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: new.reshape(raw.shape))

    tower_output = patches(
        lambda vision: f"{vision.ln_post.path}.output", read=lambda raw: raw, put=lambda raw, new: new,
        description="the last block's stream back in raster order after the tower's final norm (ln_post), before "
                    "the pixel shuffle gathers each merge_size square of patches into a token",
    )

    num_heads = config_size("num_attention_heads")
    spatial_merge_size = config_size("merge_size", "The side of the square of patches gathered into one image token.")

    @property
    def window_size(self) -> int:
        """The side of an attention window in pixels: the position grid's side in patches."""
        config = self._vision_config
        return int(config.pos_emb_height * config.patch_size)

    def image_refusal(self, width: int, height: int) -> str | None:
        """None: the processor resizes any image to a grid of whole tokens."""
        return None

    def window_order(self, grid_thw: Any) -> torch.Tensor:
        """``[patches]``: for each row of a block in window order, its row in raster order."""
        return window_layout(grid_thw, self.window_size // self.patch_size, 1)[0]

    def to_scatter_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int = -2) -> torch.Tensor:
        """``tensor`` (rows of patches in a block's window order along ``dim``: a block's value,
        a pattern's axis) regrouped so each image token's square of patches is consecutive,
        tokens in raster order, image after image. Returns a copy. (``tower_output`` is in
        raster order: the tower undoes the windows before ``ln_post``.)"""
        merge, blocks, start = self.spatial_merge_size, [], 0
        for frames, height, width in torch.as_tensor(grid_thw).tolist():
            raster = torch.arange(start, start + frames * height * width).view(frames, height // merge, merge,
                                                                               width // merge, merge)
            blocks.append(raster.permute(0, 1, 3, 2, 4).reshape(-1))
            start += frames * height * width
        if tensor.shape[dim] != start:
            raise ValueError(f"the tensor has {tensor.shape[dim]} rows along dim {dim}, but grid_thw gives {start} patches")
        windowed = self.window_order(grid_thw).argsort()  # raster row -> its place in window order
        return tensor.index_select(dim, windowed[torch.cat(blocks)].to(tensor.device))


def _envoys(module: str, prefix: str) -> Any:
    return modeling_envoys(module, {f"{prefix}VisionModel": MuseVision, f"{prefix}VisionEncoderLayer": VisionLayer,
                                    f"{prefix}VisionAttention": KIMI_VIT.Attention, f"{prefix}VisionMLP": VisionMlp})


#: The towers' module classes onto their envoys (Kimi's attention reads hold op for op);
#: Muse Spark's tower is Glimmer's under its own names.
envoys = _envoys("muse_glimmer", "MuseGlimmer")
spark_envoys = _envoys("muse_spark", "MuseSpark")
