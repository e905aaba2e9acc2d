"""Where a Fuyu image token sits in its image (`vlreg_image_grids`).

Fuyu's image processor shrinks an image larger than its ``size`` to fit inside it (its
aspect kept: both sides scaled by one factor, each truncated to whole pixels) and leaves a
smaller one as it is, then pads it on the right and bottom. The processor cuts the scaled
image, rounded up to whole patches, into ``patch_size`` squares in raster order: a token a
square, each row of them followed by a ``|NEWLINE|`` token, which is no image token. A
square of the last row or column that reaches into the padding covers less of the image
(its box is cut to the image: `vlreg.plugin.clip_boxes`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def scaled(processor: Any, width: int, height: int) -> tuple[int, int]:
    """The ``(width, height)`` Fuyu's image processor scales a ``width`` x ``height`` image to."""
    size = processor.image_processor.size
    target_h, target_w = size["height"], size["width"]
    if width <= target_w and height <= target_h:
        return width, height
    factor = min(target_h / height, target_w / width)
    return int(width * factor), int(height * factor)


def image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    patch = processor.image_processor.patch_size
    side_h, side_w = patch["height"], patch["width"]
    found = []
    for image in images:
        width, height = image.size
        new_w, new_h = scaled(processor, width, height)
        rows, columns = math.ceil(new_h / side_h), math.ceil(new_w / side_w)
        boxes = box_grid(rows, columns, side_w * width / new_w, side_h * height / new_h)
        found.append(ImageGrid(rows, columns, clip_boxes(boxes, width, height)))
    return found
