"""Where a HunYuan-VL image token sits in its image (`vlreg_image_grids`).

The processor resizes each image as a whole to sides that are multiples of ``patch_size *
merge_size`` (32 pixels) and reports its grid of patches, ``image_grid_thw``; the merger folds
each 2 x 2 block of patches into a token, blocks in raster order, ends each row of tokens with a
newline token and puts a begin token before the image and an end token after it. So an image's
grids, in sequence order: the begin token, the ``h / 2`` x ``w / 2 + 1`` rows (the last column
the newlines, over no pixels), the end token. HY-V4-VL's merger writes the rows alone
(`hy_v4_image_grids`), and a video's kept frames each as an image (`hy_v4_video_grids`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, VideoGrid, box_grid, frame_size, kept_frames

NOWHERE = float("nan")


def _boxes_with_newlines(grid: Any, size: tuple[int, int], patch: int, merge: int) -> tuple[int, int, torch.Tensor]:
    """A frame's ``h / 2`` x ``w / 2 + 1`` token rows and their boxes in a ``size`` picture,
    the last column the newlines (over no pixels)."""
    _, height, width = grid
    rows, columns = height // merge, width // merge
    side = patch * merge
    boxes = box_grid(rows, columns, side * size[0] / (width * patch), side * size[1] / (height * patch))
    newline = torch.full((rows, 1, 4), NOWHERE, dtype=torch.float64)
    return rows, columns + 1, torch.cat([torch.as_tensor(boxes).reshape(rows, columns, 4), newline], dim=1).reshape(-1, 4)


def _rows_with_newlines(grid: Any, image: Any, patch: int, merge: int) -> ImageGrid:
    """An image's token rows, each ended by its newline."""
    rows, columns, boxes = _boxes_with_newlines(grid, image.size, patch, merge)
    return ImageGrid(rows, columns, boxes, label="image", fold=merge)


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


def hy_v4_video_grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
    """HY-V4-VL's videos: per video, one grid a temporal patch, over the first to the last kept
    frame it folds (`kept_frames`: the processor's sampling followed, where it is asked to
    sample; ``temporal_patch_size`` 1 by default, so a grid a kept frame), its rows each ended
    by a newline, as an image's."""
    vision = processor.video_processor
    fold, found = vision.temporal_patch_size, []
    for index, (grid, video) in enumerate(zip(encoding["video_grid_thw"].tolist(), videos)):
        kept = kept_frames(encoding, index, video)
        rows, columns, boxes = _boxes_with_newlines(grid, frame_size(video[0]), vision.patch_size, vision.merge_size)
        found.append([VideoGrid(rows, columns, boxes, fold=vision.merge_size,
                                frames=(kept[k * fold], kept[min(k * fold + fold, len(kept)) - 1]))
                      for k in range(grid[0])])
    return found
