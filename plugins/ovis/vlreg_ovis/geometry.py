"""How Ovis 2's image tokens lie over the image: the processor resizes it to its square
``size``, the tower cuts that into patches, and the head folds each ``hidden_stride`` x
``hidden_stride`` block of patches into one token (the grid's ``fold``), in raster order:
``image_seq_length`` tokens, a square.

With ``crop_to_patches`` the processor also cuts crops, written after the whole image's
tokens between structure tokens; their geometry is not declared, so it is refused by name."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Sequence

from vlreg import Unavailable
from vlreg.plugin import ImageGrid, VideoGrid, box_grid, frame_size


def image_grids(config: Any) -> Callable:
    fold = config.vision_config.hidden_stride

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        if getattr(processor.image_processor, "crop_to_patches", False):
            raise Unavailable("vision.geometry is unavailable: Ovis 2's crops have no declared geometry; load the "
                              "processor with crop_to_patches=False (its default)")
        side = math.isqrt(processor.image_seq_length)
        return [ImageGrid(side, side, box_grid(side, side, image.size[0] / side, image.size[1] / side), fold=fold)
                for image in images]

    return grids


def ovis2_5_image_grids(config: Any) -> Callable:
    """Per image, one grid per attention window, windows in raster order, each a raster of
    the merge blocks it holds (cut short at the right and bottom edges), each block a token
    over ``patch_size * merge_size`` pixels of the resized image, scaled back to the image."""
    windows = _windows(config)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        found = []
        for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
            if frames != 1:
                raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
            found.append(windows(height, width, image.size, ImageGrid))
        return found

    return grids


def ovis2_5_video_grids(config: Any) -> Callable:
    """Per video, each temporal patch's windows as an image's (`ovis2_5_image_grids`), patch
    after patch, each window a `VideoGrid` over the frames the patch folds (one: the video
    processor's ``temporal_patch_size`` is 1), the boxes in the frame's pixels."""
    windows = _windows(config)

    def grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
        fold, found = processor.video_processor.temporal_patch_size, []
        for (slices, height, width), video in zip(encoding["video_grid_thw"].tolist(), videos):
            frames = list(video)
            if not (slices - 1) * fold < len(frames) <= slices * fold:
                raise ValueError(f"the video processor kept {slices * fold} frames of the {len(frames)} given: "
                                 "pass every frame you mean the model to see, no more")
            size = frame_size(frames[0])
            found.append([window for k in range(slices) for window in windows(
                height, width, size, partial(VideoGrid, frames=(k * fold, min(k * fold + fold, len(frames)) - 1)))])
        return found

    return grids


def _windows(config: Any) -> Callable:
    """The grids of one picture (a still image, or a video's temporal patch) of a ``height`` x
    ``width`` patch grid, shown at ``size`` pixels: one ``kind`` (`ImageGrid`, `VideoGrid`) per
    attention window, in the order the tower runs them."""
    vision_config = config.vision_config
    merge, patch = vision_config.spatial_merge_size, vision_config.patch_size
    side = vision_config.window_size // patch // merge

    def windows(height: int, width: int, size: tuple[int, int], kind: Callable) -> list:
        rows, columns = height // merge, width // merge
        cell_w, cell_h = merge * size[0] / width, merge * size[1] / height
        found = []
        for top in range(0, rows, side):
            for left in range(0, columns, side):
                r, c = min(side, rows - top), min(side, columns - left)
                boxes = box_grid(r, c, cell_w, cell_h, left=left * cell_w, top=top * cell_h)
                found.append(kind(r, c, boxes, label=f"window {top // side},{left // side}", fold=merge))
        return found

    return windows
