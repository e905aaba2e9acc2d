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

import re
from typing import Any, Sequence

from vlreg.plugin import ImageGrid, VideoGrid, box_grid, frame_size, kept_frames


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


def qwen_video_grids(times: str | None = None, t_counts_frames: bool = False) -> Any:
    """`vlreg_video_grids` for a Qwen-like video processor (``video_grid_thw`` ``[t, h, w]``,
    ``temporal_patch_size`` frames folded into each token, ``merge_size``): per video, one
    `VideoGrid` per temporal patch, covering the first to the last frame it folds, of the
    frames as passed (`kept_frames`: the processor's sampling followed; it repeats the last
    kept frame to fill the last patch), each token over a square of the frame resized whole.
    ``times``: a pattern whose group is the time the processor writes at each temporal patch,
    in order (Qwen3-VL's ``<1.0 seconds>``, GLM's number after each frame), read off the
    prompt as encoded; ``None``: the processor writes none. ``t_counts_frames``: ``t`` counts
    frames, not temporal patches (ERNIE 4.5-VL's: its tower reads each frame alone, its
    projector folds each pair of frames into one token)."""

    def grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
        vision = processor.video_processor
        patch, merge, fold = vision.patch_size, vision.merge_size, vision.temporal_patch_size
        seconds = _written(encoding, processor, times)
        found, chunk = [], 0
        for index, ((slices, height, width), video) in enumerate(zip(encoding["video_grid_thw"].tolist(), videos)):
            slices = slices // fold if t_counts_frames else slices
            kept = kept_frames(encoding, index, video)
            rows, columns, side = height // merge, width // merge, patch * merge
            (frame_width, frame_height) = frame_size(video[0])
            x_scale, y_scale = frame_width / (width * patch), frame_height / (height * patch)
            boxes = box_grid(rows, columns, side * x_scale, side * y_scale)
            spans = [(kept[k * fold], kept[min(k * fold + fold, len(kept)) - 1]) for k in range(slices)]
            found.append([VideoGrid(rows, columns, boxes, frames=span, seconds=seconds[chunk + k] if seconds else None)
                          for k, span in enumerate(spans)])
            chunk += slices
        return found

    return grids


def _written(encoding: Any, processor: Any, times: str | None) -> list[float] | None:
    """The times the processor wrote in the prompt, in order, or ``None``: with no pattern, or
    with as many as there are temporal patches in every video."""
    if times is None:
        return None
    text = "".join(processor.tokenizer.decode(row) for row in encoding["input_ids"])
    found = [float(value) for value in re.findall(times, text)]
    return found if len(found) == int(encoding["video_grid_thw"][:, 0].sum()) else None
