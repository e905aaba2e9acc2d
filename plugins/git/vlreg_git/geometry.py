"""Where each of GIT's image tokens lies in its image (`vlreg_image_grids`).

GIT's processor (``CLIPImageProcessor``) resizes an image (its shorter side to
``size["shortest_edge"]``, the longer in proportion, truncated; or to ``size``'s height and
width), then, where it is set to, crops the centre ``crop_size``. The tower cuts that into
``patch_size`` squares in raster order after a class token, and the projector keeps every
row: an image's tokens are its class token (covering no pixels of its own: NaN) and a grid
of patches, each box its square moved back onto the image, cut to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def prefix_tokens(config: Any, inputs: Mapping) -> int:
    """The tokens ``git`` puts before a prompt: per image (or frame, on a video checkpoint's
    ``[batch, frames, ...]`` pixels) a class token and its patches."""
    pixels = inputs["pixel_values"]
    patch = config.vision_config.patch_size
    frames = pixels.shape[1] if pixels.dim() == 5 else 1
    return frames * ((pixels.shape[-2] // patch) * (pixels.shape[-1] // patch) + 1)


def _resized(settings: Any, width: int, height: int) -> tuple[int, int]:
    size = settings.size
    if "shortest_edge" in size and size["shortest_edge"]:
        short = int(size["shortest_edge"])
        return (int(short * width / height), short) if width >= height else (short, int(short * height / width))
    return int(size["width"]), int(size["height"])


def git_image_grids(config: Any):
    """``vlreg_image_grids`` for GIT: each image's class token, then its patches."""
    patch = config.vision_config.patch_size

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        settings = processor.image_processor
        found = []
        for image in images:
            width, height = image.size
            resized = _resized(settings, width, height) if settings.do_resize else (width, height)
            left = top = 0
            canvas = resized
            if settings.do_center_crop:
                canvas = (int(settings.crop_size["width"]), int(settings.crop_size["height"]))
                left, top = (resized[0] - canvas[0]) // 2, (resized[1] - canvas[1]) // 2
            rows, columns = canvas[1] // patch, canvas[0] // patch
            scale = torch.tensor([resized[0] / width, resized[1] / height] * 2, dtype=torch.float64)
            boxes = box_grid(rows, columns, patch, patch, left, top) / scale
            found.append([ImageGrid(1, 1, torch.full((1, 4), math.nan), label="class token"),
                          ImageGrid(rows, columns, clip_boxes(boxes, width, height), label="patches")])
        return found

    return grids
