"""Where a Qwen image token sits in its image (`vlreg_image_grids`), for every Qwen line
whose processor is ``Qwen2VLImageProcessor``.

The processor resizes each image as a whole (no crop, no padding) to a size whose sides
are multiples of ``patch_size * merge_size`` and reports its grid of patches,
``image_grid_thw`` ``[t, h, w]``. The merger folds each ``merge_size`` x ``merge_size``
block of patches into one token, blocks in raster order, and that is the order of the
image's tokens in the sequence: a ``h / merge`` x ``w / merge`` grid of tokens, each over a
square of ``patch_size * merge_size`` pixels of the resized image (28 x 28 on Qwen2-VL),
which is scaled back to the original image exactly, since the resize is a plain scaling.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def qwen_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image: ``image_grid_thw``'s patches merged into tokens."""
    vision = processor.image_processor
    patch, merge = vision.patch_size, vision.merge_size
    grids = []
    for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        rows, columns = height // merge, width // merge
        side = patch * merge
        x_scale, y_scale = image.size[0] / (width * patch), image.size[1] / (height * patch)
        grids.append(ImageGrid(rows, columns, box_grid(rows, columns, side * x_scale, side * y_scale)))
    return grids
