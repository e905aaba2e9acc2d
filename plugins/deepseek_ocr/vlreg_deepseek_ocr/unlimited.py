"""Unlimited-OCR (``unlimited_ocr``): DeepSeek-OCR (v1)'s shape over DeepSeek-OCR 2's classes.

The tower (``UnlimitedOcrVisionModel``) is SAM's ViT, then a CLIP encoder that takes SAM's
grid as its patch embeddings (a class token first, learned positions resampled to the grid,
a pre-norm): its blocks are ``vision.layers`` (CLIP's names). The tower returns each patch's
CLIP row (the class token dropped) beside SAM's, channel-wise, ``[images, patches,
vision_hidden_size + SAM's channels]``: ``tower_output``, what the projector reads. Each
patch is a token: the features are each image's tiles as one raster over its tiled canvas,
then its global view's, every row of tokens ended by the learned ``image_newline`` row,
then ``view_separator`` (`unlimited_image_grids`). The text model is DeepSeek-OCR 2's
blocks under a reference sliding window (the prompt's keys kept, the generated ones slid).
As on DeepSeek-OCR 2, a trace whose images were cut into tiles refuses the tower's values.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import Attention, ImageGrid, Layer, Mlp, clip_boxes, modeling_envoys, patches, tower_envoys

from .text import GreedyRoutedMoe
from .vision import QueryVision


class SamClipVision(QueryVision):
    """SAM, then a CLIP encoder with a class token before the patches (see the module)."""

    class_tokens = 1
    trailing_tokens = 0

    def image_refusal(self, width: int, height: int) -> str | None:
        """An image so thin that scaling its longer side to the global view's leaves its
        shorter side no pixel, which the image processor cannot resize to."""
        settings = getattr(self.root.processor, "image_processor", None)
        if settings is None or not hasattr(settings, "maximum_pad_value"):
            return None
        side = max(settings.size["height"], settings.size["width"])
        if not settings.crop_to_patches and side <= settings.maximum_pad_value:
            return None  # squeezed onto the square, never scaled by its aspect
        if round(min(width, height) * side / max(width, height)) > 0:
            return None
        return (f"scaled to the {side}-pixel global view its shorter side is less than half a pixel; pass an image "
                f"whose sides differ by less than {2 * side} times")

    tower_output = patches(
        "output",
        read=lambda raw: raw.last_hidden_state,
        put=lambda raw, new: raw.__setitem__("last_hidden_state", new) or raw,
        description="each patch's CLIP row beside SAM's, what the projector reads, "
                    "[images, patches, vision_hidden_size + SAM's channels]",
    )


#: The CLIP encoder's classes onto the standard envoys, the tower onto `SamClipVision`.
envoys = tower_envoys("unlimited_ocr", ("UnlimitedOcrVisionModel", "UnlimitedOcrEncoderLayer", "UnlimitedOcrAttention",
                                        "UnlimitedOcrMLP"), vision=SamClipVision)
#: From the tower: CLIP's blocks and norms.
RENAME = {"vision_encoder.encoder.layers": "layers", "layer_norm1": "input_layernorm",
          "layer_norm2": "post_attention_layernorm"}
#: The text blocks: DeepSeek-OCR 2's, renamed.
text_envoys = modeling_envoys("unlimited_ocr", {
    "UnlimitedOcrTextDecoderLayer": Layer, "UnlimitedOcrTextAttention": Attention, "UnlimitedOcrTextMLP": Mlp,
    "UnlimitedOcrTextMoe": GreedyRoutedMoe})


def _cells(rows: int, columns: int, width: float, height: float, left: float = 0.0, top: float = 0.0,
           scale_x: float = 1.0, scale_y: float = 1.0) -> torch.Tensor:
    """A ``rows`` x ``columns`` raster of equal cells over a ``width`` x ``height`` frame whose
    origin is (``left``, ``top``) in frame pixels, scaled back onto the image, each row
    ended by a newline cell (NaN)."""
    x = torch.arange(columns + 1, dtype=torch.float64) * width / columns
    y = torch.arange(rows + 1, dtype=torch.float64) * height / rows
    boxes = torch.stack([((x[:-1] - left) * scale_x).repeat(rows), ((y[:-1] - top) * scale_y).repeat_interleave(columns),
                         ((x[1:] - left) * scale_x).repeat(rows), ((y[1:] - top) * scale_y).repeat_interleave(columns)], -1)
    boxes = boxes.view(rows, columns, 4)
    return torch.cat([boxes, torch.full((rows, 1, 4), math.nan, dtype=torch.float64)], 1).view(-1, 4)


def unlimited_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """``vlreg_image_grids``: each image's tiles (one raster over the tiled canvas, a newline
    ending each row), its global view (the same), the separator. A token is a cell of SAM's
    grid after its two stride-2 convolutions; the global view is the image scaled to ``size``
    and padded to a square (centred), or, with ``crop_to_patches=False`` at most
    ``maximum_pad_value`` pixels, squeezed onto the square."""
    settings = processor.image_processor
    side = max(settings.size.height, settings.size.width)
    local = math.ceil(settings.tile_size // processor.patch_size / processor.downsample_ratio)
    global_ = math.ceil(side // processor.patch_size / processor.downsample_ratio)
    found = []
    for image, crops, (columns, rows) in zip(images, encoding["num_local_patches"], encoding["patches_grid"]):
        width, height = image.size
        grids = []
        if crops:
            across, down = columns * local, rows * local
            grids.append(ImageGrid(down, across + 1, clip_boxes(_cells(down, across, width, height), width, height),
                                   "tiles"))
        squeezed = not settings.crop_to_patches and side <= settings.maximum_pad_value
        if squeezed:
            boxes = _cells(global_, global_, width, height)
        else:
            scale = side / max(width, height)
            shown_w, shown_h = round(width * scale), round(height * scale)
            boxes = _cells(global_, global_, side, side, (side - shown_w) // 2, (side - shown_h) // 2,
                           width / shown_w, height / shown_h)
        grids.append(ImageGrid(global_, global_ + 1, clip_boxes(boxes, width, height), "global"))
        grids.append(ImageGrid(1, 1, torch.full((1, 4), math.nan), "view separator"))
        found.append(grids)
    return found
