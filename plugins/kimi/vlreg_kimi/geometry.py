"""Where a Kimi K2.5 image or video token sits in its image or frames (`vlreg_image_grids`,
`vlreg_video_grids`).

``Kimi_K25ImageProcessor`` shrinks each image whole (never enlarges it) to fit its budget of
patches, ``navit_resize``'s scale, then pads it at the right and bottom to a multiple of
``patch_size * merge_size`` pixels (28) and cuts it into patches row by row, reporting the
padded grid of patches, ``image_grid_thw`` ``[1, h, w]``. Each image token is a 2 x 2 block of
patches, the blocks in raster order: an ``h / 2`` x ``w / 2`` grid of 28-pixel squares of
the resized image, scaled back to the original by the resize's own ratio and cut to the
image, a token over the padding alone a NaN row.

``Kimi_K25VideoProcessor`` cuts the frames it keeps into chunks of ``temporal_patch_size``
(the last may be shorter), resizes and pads each frame as an image, and reports a row of
``video_grid_thw`` a chunk, ``[frames in the chunk, h, w]``; the tower averages the chunk's
frames patch by patch, so a chunk is one ``h / 2`` x ``w / 2`` grid of tokens over all its
frames, written after the chunk's start time (``HH:MM:SS.mmm``).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, VideoGrid, box_grid, clip_boxes, frame_size, kept_frames

#: The start time the processor writes before each chunk of a video.
CHUNK_TIME = re.compile(r"(\d+):(\d\d):(\d\d(?:\.\d+)?)\s*<\|media_begin\|>\s*video")


def _boxes(vision: Any, size: tuple[int, int], height: int, width: int) -> torch.Tensor:
    """The boxes of an ``height / merge`` x ``width / merge`` grid of tokens over a picture of
    ``size`` (width, height) that ``vision`` (the image or video processor) resized and padded."""
    from transformers.models.kimi_k25.image_processing_kimi_k25 import navit_resize

    patch, merge = vision.patch_size, vision.merge_size
    columns, rows = size
    (resized_h, resized_w), _ = navit_resize(rows, columns, patch, merge, vision.max_patches, vision.size["max_height"])
    side = patch * merge
    boxes = box_grid(height // merge, width // merge, side * columns / resized_w, side * rows / resized_h)
    return clip_boxes(boxes, columns, rows)


def kimi_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image, its tokens' boxes undoing the processor's resize and padding."""
    vision, grids = processor.image_processor, []
    for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
        if frames != 1:
            raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
        boxes = _boxes(vision, image.size, height, width)
        grids.append(ImageGrid(height // vision.merge_size, width // vision.merge_size, boxes))
    return grids


def kimi_video_grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
    """Per video, one grid a chunk, covering the first to the last frame it pools (of the
    frames as passed: the processor's sampling followed), with the chunk's written start time."""
    vision = processor.video_processor
    chunks = encoding["video_grid_thw"].tolist()  # a row a chunk, [frames, h, w], the videos' in order
    text = "".join(processor.tokenizer.decode(row) for row in encoding["input_ids"])
    seconds = [int(h) * 3600 + int(m) * 60 + float(s) for h, m, s in CHUNK_TIME.findall(text)]
    rows, found = iter(zip(chunks, seconds if len(seconds) == len(chunks) else [None] * len(chunks))), []
    for index, video in enumerate(videos):
        kept, grids, start = kept_frames(encoding, index, video), [], 0
        while start < len(kept):
            (frames, height, width), time = next(rows)
            boxes = _boxes(vision, frame_size(video[0]), height, width)
            grids.append(VideoGrid(height // vision.merge_size, width // vision.merge_size, boxes,
                                   frames=(kept[start], kept[start + frames - 1]), seconds=time))
            start += frames
        found.append(grids)
    return found
