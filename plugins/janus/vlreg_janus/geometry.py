"""Where a Janus image token sits in its image (`vlreg_image_grids`).

Janus's image processor resizes the image so its longer side is the tower's
``image_size`` (the shorter side ``round(side * scale)``, at least ``min_size``), then pads
it to a square, centred, with the image mean's colour. The tower cuts the square into
``image_size / patch_size`` patches a side, one token each (the aligner keeps every
patch; no class token, no fold). So an image is one `ImageGrid` over the square; a
token's box is its cell of the square moved back onto the image and cut to it, and a
token whose cell is all padding covers no pixels (a NaN box).
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def placement(processor: Any, width: int, height: int) -> tuple[float, float, float, float]:
    """``(left, top, x_scale, y_scale)``: where the resized image sits in the processor's
    square (its top-left corner, in the square's pixels) and original pixels per square
    pixel along each axis."""
    vision = processor.image_processor
    size = vision.size.height
    scale = size / max(width, height)
    resized_w = max(round(width * scale), vision.min_size)
    resized_h = max(round(height * scale), vision.min_size)
    left = (size - resized_w) // 2 if vision.do_pad and width < height else 0
    top = (size - resized_h) // 2 if vision.do_pad and height < width else 0
    return left, top, width / resized_w, height / resized_h


def janus_image_grids(config: Any):
    """``vlreg_image_grids`` for Janus: one grid of ``image_size / patch_size`` tokens a side."""
    tower = config.vision_config
    side = tower.image_size // tower.patch_size

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        cell = processor.image_processor.size.height / side
        found = []
        for image in images:
            width, height = image.size
            left, top, x_scale, y_scale = placement(processor, width, height)
            boxes = box_grid(side, side, cell * x_scale, cell * y_scale, -left * x_scale, -top * y_scale)
            found.append(ImageGrid(side, side, clip_boxes(boxes, width, height)))
        return found

    return grids
