"""Where a Florence-2 image token sits in its image (`vlreg_image_grids`).

The processor resizes every image to one ``height`` x ``width`` (its ``size``, no crop,
no padding). DaViT's stages each convolve with a stride (and a padding that keeps the
grid at ``side // stride``), so the last grid has ``rows`` x ``columns`` cells, each
standing for ``height / rows`` x ``width / columns`` pixels of the resized image. The
projector puts one pooled token (the mean of every cell) before the cells: an image is a
1 x 1 grid that covers no pixels of its own (NaN, as a class token), then the cells in
raster order, their boxes moved back onto the original image.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def final_grid(vision: Any, height: int, width: int) -> tuple[int, int]:
    """The last stage's (rows, columns) for a ``height`` x ``width`` input."""
    for kernel, stride, padding in zip(vision.patch_size, vision.patch_stride, vision.patch_padding):
        height = (height + 2 * padding - kernel) // stride + 1
        width = (width + 2 * padding - kernel) // stride + 1
    return height, width


def florence2_image_grids(config: Any):
    """``vlreg_image_grids`` for Florence-2: a pooled token, then the last grid's cells."""
    vision = config.vision_config

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        size = processor.image_processor.size
        side_h, side_w = size["height"], size["width"]
        rows, columns = final_grid(vision, side_h, side_w)
        found = []
        for image in images:
            width, height = image.size
            x_scale, y_scale = width / side_w, height / side_h
            boxes = box_grid(rows, columns, side_w / columns * x_scale, side_h / rows * y_scale)
            found.append([ImageGrid(1, 1, torch.full((1, 4), math.nan), label="pooled"),
                          ImageGrid(rows, columns, clip_boxes(boxes, width, height))])
        return found

    return grids
