"""Where an Inkling image token sits in its image (`vlreg_image_grids`).

The image processor does not resize: it pads each image on the right and bottom to whole
tokens (``size``, 40 x 40 pixels on the published processor) and reports the grid of tokens,
``image_grid_thw`` ``[1, rows, columns]``, one token per cell in raster order. A token's box is
its cell, cut to the image (the last row and column may cover padding too).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image, from ``image_grid_thw`` (tokens, not patches)."""
    size = processor.image_processor.size
    height, width = size["height"], size["width"]
    grids = []
    for (frames, rows, columns), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        boxes = clip_boxes(box_grid(rows, columns, width, height), *image.size)
        grids.append(ImageGrid(rows, columns, boxes))
    return grids


def inkling_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """Inkling 1's grids: its processor may first scale an image by ``rescale_image_frac`` (the
    long edge, capped at ``rescale_image_max_upscaled_long_edge``; off by default), then cuts it
    into ``size`` squares, ``ceil(height / side)`` rows of ``width // side + 1`` (the last column
    over padding where the width is a whole number of squares: a token over no pixels)."""
    vision = processor.image_processor
    side = vision.size["height"]
    grids = []
    for image in images:
        width, height = image.size
        scaled_width, scaled_height = width, height
        if vision.rescale_image_frac is not None:
            long_edge = max(width, height)
            target = long_edge * vision.rescale_image_frac
            if vision.rescale_image_max_upscaled_long_edge is not None:
                target = min(target, max(vision.rescale_image_max_upscaled_long_edge, long_edge))
            ratio = target / long_edge
            scaled_width, scaled_height = math.floor(width * ratio + 0.5), math.floor(height * ratio + 0.5)
        rows, columns = -(-scaled_height // side), scaled_width // side + 1
        cell = box_grid(rows, columns, side * width / scaled_width, side * height / scaled_height)
        grids.append(ImageGrid(rows, columns, clip_boxes(cell, width, height)))
    return grids
