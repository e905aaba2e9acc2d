"""Where a Kimi K2.5 image token sits in its image (`vlreg_image_grids`).

``Kimi_K25ImageProcessor`` shrinks each image whole (never enlarges it) to fit its budget of
patches, ``navit_resize``'s scale, then pads it at the right and bottom to a multiple of
``patch_size * merge_size`` pixels (28) and cuts it into patches row by row, reporting the
padded grid of patches, ``image_grid_thw`` ``[1, h, w]``. Each image token is a 2 x 2 block of
patches, the blocks in raster order: an ``h / 2`` x ``w / 2`` grid of 28-pixel squares of
the resized image, scaled back to the original by the resize's own ratio and cut to the
image, a token over the padding alone a NaN row.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def kimi_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image, its tokens' boxes undoing the processor's resize and padding."""
    from transformers.models.kimi_k25.image_processing_kimi_k25 import navit_resize

    vision = processor.image_processor
    patch, merge = vision.patch_size, vision.merge_size
    grids = []
    for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        columns, rows = image.size
        (resized_h, resized_w), _ = navit_resize(rows, columns, patch, merge, vision.max_patches,
                                                 vision.size["max_height"])
        side = patch * merge
        boxes = box_grid(height // merge, width // merge, side * columns / resized_w, side * rows / resized_h)
        grids.append(ImageGrid(height // merge, width // merge, clip_boxes(boxes, columns, rows)))
    return grids
