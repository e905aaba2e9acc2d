"""Where a Muse image token sits in its image (`vlreg_image_grids`).

``MuseGlimmerImageProcessor`` resizes each image whole (stretching it, shrinking or
enlarging) to the grid of ``patch_size * merge_size``-pixel squares (28) whose shape is
closest to the image's under its token budget (``max_image_tokens``; its ``smart_resize``),
with no padding, and cuts it into patches row by row, reporting the grid of patches,
``image_grid_thw`` ``[1, h, w]``. Each image token is a ``merge_size`` square of patches, the
squares in raster order: an ``h / 2`` x ``w / 2`` grid of boxes over the original image, each
the image's width over the columns wide and its height over the rows high.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def muse_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image, its tokens' boxes undoing the processor's resize."""
    merge = processor.image_processor.merge_size
    grids = []
    for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        rows, columns = height // merge, width // merge
        grids.append(ImageGrid(rows, columns, box_grid(rows, columns, image.size[0] / columns, image.size[1] / rows)))
    return grids
