"""Where a GLM-5-Next image token lies over the image.

GLM-5-Next's image processor does not stretch an image onto its canvas, as GLM's others do:
it scales it by one factor for both sides (never up, once the image holds the minimum
tokens), keeping its aspect, to fit a canvas whose sides are multiples of 28 pixels, and
pads the rest (right and bottom) with zeros. A token is a 28 x 28 square of that canvas: its
box is the square scaled back by each side's factor, cut to the image; a token wholly over
the padding covers nothing of it (a box of NaN).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def padded_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image: ``image_grid_thw``'s patches merged into tokens, over the part of
    the canvas the image fills."""
    vision = processor.image_processor
    patch, merge = vision.patch_size, vision.merge_size
    side = patch * merge
    grids = []
    for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        rows, columns = height // merge, width // merge
        canvas_w, canvas_h = width * patch, height * patch
        image_w, image_h = image.size
        scale = min(canvas_h / image_h, canvas_w / image_w)
        if image_h * image_w >= side**2 * vision.min_image_tokens:  # the processor's test, the temporal factor cut
            scale = min(1.0, scale)
        content_w = max(1, min(canvas_w, math.floor(image_w * scale)))
        content_h = max(1, min(canvas_h, math.floor(image_h * scale)))
        boxes = box_grid(rows, columns, side * image_w / content_w, side * image_h / content_h)
        grids.append(ImageGrid(rows, columns, clip_boxes(boxes, image_w, image_h)))
    return grids
