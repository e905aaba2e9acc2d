"""Qwen2.5-VL's windowed Qwen ViT, and the maps between its two row orders.

The tower cuts each frame's grid of merge blocks into square windows of
``window_size`` pixels (``window_size // patch_size // spatial_merge_size`` merge blocks a
side, cut short at the right and bottom edges), and at entry regroups the row window by
window: windows in raster order, blocks in raster order inside each. Its blocks, its
``tower_output`` and the merger's output are therefore in *window order*; after the merger
the tower restores *merge-block order*, the order of the image tokens, so
``image_features`` (read at the scatter) and ``patch_embeddings`` (read before the
regrouping) are in that order. A merge block's ``spatial_merge_size ** 2`` patches move
together and keep their order, so one permutation of blocks serves patch rows and merged
token rows alike. Images stay contiguous and in their order under it.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import adapter
from vlreg.plugin import tower_envoys as standard_tower_envoys

QwenVision = adapter("qwen_vit").Vision


def _grid(grid_thw: Any) -> list[tuple[int, int, int]]:
    rows = torch.as_tensor(grid_thw).reshape(-1, 3).tolist()
    return [(int(t), int(h), int(w)) for t, h, w in rows]


def window_layout(grid_thw: Any, side: int, merge: int) -> tuple[torch.Tensor, list[int]]:
    """The window order of the merge blocks of every image in ``grid_thw`` and the windows'
    sizes in blocks.

    ``order[i]`` is the merge-block-order index of the block at window position ``i``;
    ``side`` is a window's side in merge blocks. Windows never span two frames.
    """
    if side < 1:
        raise ValueError("a window must be at least one merge block wide")
    order: list[torch.Tensor] = []
    sizes: list[int] = []
    offset = 0
    for frames, height, width in _grid(grid_thw):
        rows, cols = height // merge, width // merge
        blocks = torch.arange(frames * rows * cols).reshape(frames, rows, cols) + offset
        for frame in blocks:
            for top in range(0, rows, side):
                for left in range(0, cols, side):
                    window = frame[top : top + side, left : left + side].reshape(-1)
                    order.append(window)
                    sizes.append(window.numel())
        offset += frames * rows * cols
    return torch.cat(order), sizes


def _bounds(sizes: list[int]) -> torch.Tensor:
    return torch.tensor([0, *sizes], dtype=torch.int64).cumsum(0).to(torch.int32)


class WindowedQwenVision(QwenVision):
    """The Qwen2.5-VL tower: the Qwen ViT with windowed attention on every block but
    `fullatt_block_indexes`, its rows in window order (see the module docstring).

    Every helper takes ``grid_thw``, the processor's ``image_grid_thw`` (``[t, h, w]`` per
    image, in patches), which is also the tower's ``inputs[1]["grid_thw"]`` in a trace.
    """

    @property
    def fullatt_block_indexes(self) -> tuple[int, ...]:
        """The blocks whose attention spans each whole image (each frame); every other
        block attends within windows."""
        return tuple(self._vision_config.fullatt_block_indexes)

    @property
    def _window_side(self) -> int:
        return self.window_size // self.patch_size // self.spatial_merge_size

    def window_index(self, grid_thw: Any) -> torch.Tensor:
        """``[image_tokens]``: for each merged token in window order, its index in
        merge-block (scatter) order, as the tower computes its regrouping."""
        return window_layout(grid_thw, self._window_side, self.spatial_merge_size)[0]

    def cu_seqlens(self, layer: int, grid_thw: Any) -> torch.Tensor:
        """Where block ``layer``'s attention splits the row into calls, in patches (int32,
        ``[calls + 1]``): at windows on a windowed block, at images (frames) on a
        full-attention block. It equals ``layers[layer].self_attn.inputs[1]["cu_seqlens"]``,
        and is what ``self_attn.patterns`` takes."""
        unit = self.spatial_merge_size**2
        if layer % self.num_layers in self.fullatt_block_indexes:
            frames = [h * w for t, h, w in _grid(grid_thw) for _ in range(t)]
            return _bounds(frames)
        _, sizes = window_layout(grid_thw, self._window_side, self.spatial_merge_size)
        return _bounds([size * unit for size in sizes])

    def to_window_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int = -2) -> torch.Tensor:
        """``tensor`` (rows in merge-block order along ``dim``) regrouped into window order.

        The rows are patches (``patch_embeddings``) or merged tokens (``image_features``),
        told apart by their count. ``dim`` defaults to the row axis of ``[patches, hidden]``,
        ``[1, patches, hidden]`` and ``[1, heads, patches, head_dim]``; pass ``dim=1`` for
        ``attention_head_outputs``. Returns a copy: an edit to it is not an edit to the model.
        """
        return tensor.index_select(dim, self._row_order(tensor, grid_thw, dim))

    def to_scatter_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int = -2) -> torch.Tensor:
        """``tensor`` (rows in window order along ``dim``: a block value, ``tower_output``,
        ``projector.output``) put back in merge-block order, the order of ``patch_embeddings``
        and, for merged tokens, of the image tokens. The inverse of `to_window_order`; the
        same conventions."""
        return tensor.index_select(dim, self._row_order(tensor, grid_thw, dim).argsort())

    def _row_order(self, tensor: torch.Tensor, grid_thw: Any, dim: int) -> torch.Tensor:
        blocks = self.window_index(grid_thw)
        unit = self.spatial_merge_size**2
        rows = tensor.shape[dim]
        if rows == blocks.numel():
            order = blocks
        elif rows == blocks.numel() * unit:
            order = (blocks[:, None] * unit + torch.arange(unit)).reshape(-1)
        else:
            raise ValueError(
                f"the tensor has {rows} rows along dim {dim}, but grid_thw gives "
                f"{blocks.numel() * unit} patches and {blocks.numel()} merged tokens"
            )
        return order.to(tensor.device)


#: The Qwen2.5-VL tower's module classes onto the windowed Qwen ViT's envoys.
tower_envoys = standard_tower_envoys(
    "qwen2_5_vl", ("Qwen2_5_VisionTransformerPretrainedModel", "Qwen2_5_VLVisionBlock", "Qwen2_5_VLVisionAttention",
                   "Qwen2_5_VLMLP"),
    vision=WindowedQwenVision, attention=adapter("qwen_vit").Attention)


class RiceVision(QwenVision):
    """LLaVA-OneVision-1.5's RICE-ViT (transformers 5.25): the Qwen ViT unwindowed (every block
    attends within each frame), with a class token before each frame's patches
    (``cls_embeddings``, then ``pre_layernorm``), so the blocks' stream holds ``patches + 1``
    rows a frame; the class rows are dropped before the merger."""

    class_tokens = 1


#: RICE-ViT's module classes onto the Qwen ViT's envoys (the attention reads hold as they are).
rice_envoys = standard_tower_envoys(
    "llava_onevision1_5",
    ("LlavaOnevision15VisionModel", "LlavaOnevision15VisionBlock", "LlavaOnevision15VisionAttention",
     "LlavaOnevision15VisionMLP"),
    vision=RiceVision, attention=adapter("qwen_vit").Attention)
