"""Where a HunYuan-VL image token sits in its image (`vlreg_image_grids`).

The processor resizes each image as a whole to sides that are multiples of ``patch_size *
merge_size`` (32 pixels) and reports its grid of patches, ``image_grid_thw``; the merger folds
each 2 x 2 block of patches into a token, blocks in raster order, ends each row of tokens with a
newline token and puts a begin token before the image and an end token after it. So an image's
grids, in sequence order: the begin token, the ``h / 2`` x ``w / 2 + 1`` rows (the last column
the newlines, over no pixels), the end token. HY-V4-VL's merger writes the rows alone
(`hy_v4_image_grids`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid

NOWHERE = float("nan")


def _rows_with_newlines(grid: Any, image: Any, patch: int, merge: int) -> ImageGrid:
    """An image's ``h / 2`` x ``w / 2 + 1`` token rows, the last column the newlines."""
    _, height, width = grid
    rows, columns = height // merge, width // merge
    side = patch * merge
    boxes = box_grid(rows, columns, side * image.size[0] / (width * patch), side * image.size[1] / (height * patch))
    newline = torch.full((rows, 1, 4), NOWHERE, dtype=torch.float64)
    with_newlines = torch.cat([torch.as_tensor(boxes).reshape(rows, columns, 4), newline], dim=1).reshape(-1, 4)
    return ImageGrid(rows, columns + 1, with_newlines, label="image", fold=merge)


def hunyuan_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    vision = processor.image_processor
    mark = torch.full((1, 4), NOWHERE)
    return [[ImageGrid(1, 1, mark, label="begin"), _rows_with_newlines(grid, image, vision.patch_size, vision.merge_size),
             ImageGrid(1, 1, mark, label="end")]
            for grid, image in zip(encoding["image_grid_thw"].tolist(), images)]


def hy_v4_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """HY-V4-VL's: the rows with their newlines alone (its merger writes no begin or end token)."""
    vision = processor.image_processor
    return [[_rows_with_newlines(grid, image, vision.patch_size, vision.merge_size)]
            for grid, image in zip(encoding["image_grid_thw"].tolist(), images)]
