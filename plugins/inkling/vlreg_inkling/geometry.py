"""Where an Inkling image token sits in its image (`vlreg_image_grids`).

The image processor does not resize: it pads each image on the right and bottom to whole
tokens (``size``, 40 x 40 pixels on the published processor) and reports the grid of tokens,
``image_grid_thw`` ``[1, rows, columns]``, one token per cell in raster order. A token's box is
its cell, cut to the image (the last row and column may cover padding too).
"""

from __future__ import annotations

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
