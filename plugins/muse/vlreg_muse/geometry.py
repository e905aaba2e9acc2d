"""Where a Muse image or video token sits in its image or frames (`vlreg_image_grids`,
`vlreg_video_grids`).

``MuseGlimmerImageProcessor`` resizes each image whole (stretching it, shrinking or
enlarging) to the grid of ``patch_size * merge_size``-pixel squares (28) whose shape is
closest to the image's under its token budget (``max_image_tokens``; its ``smart_resize``),
with no padding, and cuts it into patches row by row, reporting the grid of patches,
``image_grid_thw`` ``[1, h, w]``. Each image token is a ``merge_size`` square of patches, the
squares in raster order: an ``h / 2`` x ``w / 2`` grid of boxes over the original image, each
the image's width over the columns wide and its height over the rows high.

``MuseGlimmerVideoProcessor`` samples the frames it keeps (by default at its ``fps`` of the
video's, 24 where the frames carry no rate), resizes each whole as an image (under
``max_video_frame_tokens``) and folds each ``temporal_patch_size`` of them into one temporal
patch (repeating the last frame to fill the last), ``video_grid_thw`` ``[t, h, w]``: a grid of
tokens a temporal patch, as an image's, written after the patch's first time
(``frame_timestamp_format``, ``Time: 0.5s``).
"""

from __future__ import annotations

import re
import string
from typing import Any, Sequence

from vlreg.plugin import ImageGrid, VideoGrid, box_grid, frame_size, kept_frames


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


def muse_video_grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
    """Per video, one grid a temporal patch, covering the first to the last frame it folds (of
    the frames as passed: the processor's sampling followed), with the time written before it."""
    vision = processor.video_processor
    merge, fold = vision.merge_size, vision.temporal_patch_size
    patches = encoding["video_grid_thw"].tolist()
    text = "".join(processor.tokenizer.decode(row) for row in encoding["input_ids"])
    seconds = [float(value) for value in re.findall(_written(vision.frame_timestamp_format), text)]
    times = iter(seconds if len(seconds) == sum(slices for slices, _, _ in patches) else [])
    found = []
    for index, ((slices, height, width), video) in enumerate(zip(patches, videos)):
        kept, rows, columns = kept_frames(encoding, index, video), height // merge, width // merge
        (frame_width, frame_height) = frame_size(video[0])
        boxes = box_grid(rows, columns, frame_width / columns, frame_height / rows)
        found.append([VideoGrid(rows, columns, boxes, frames=(kept[k * fold], kept[min(k * fold + fold, len(kept)) - 1]),
                                seconds=next(times, None)) for k in range(slices)])
    return found


def _written(format: str) -> str:
    """A pattern matching what ``format`` writes, its ``timestamp`` field the group."""
    return "".join(re.escape(literal) + (r"(-?\d+(?:\.\d+)?)" if field == "timestamp" else "")
                   for literal, field, _, _ in string.Formatter().parse(format))
