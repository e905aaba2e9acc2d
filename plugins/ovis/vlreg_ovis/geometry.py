"""How Ovis 2's image tokens lie over the image: the processor resizes it to its square
``size``, the tower cuts that into patches, and the head folds each ``hidden_stride`` x
``hidden_stride`` block of patches into one token (the grid's ``fold``), in raster order:
``image_seq_length`` tokens, a square.

With ``crop_to_patches`` the processor also cuts crops, written after the whole image's
tokens between structure tokens; their geometry is not declared, so it is refused by name."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from vlreg import Unavailable
from vlreg.plugin import ImageGrid, box_grid


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
    vision_config = config.vision_config
    merge, patch = vision_config.spatial_merge_size, vision_config.patch_size
    side = vision_config.window_size // patch // merge

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        found = []
        for (frames, height, width), image in zip(encoding["image_grid_thw"].tolist(), images):
            if frames != 1:
                raise ValueError(f"an image of {frames} frames: only still images (t = 1) have a grid here")
            rows, columns = height // merge, width // merge
            cell_w, cell_h = merge * image.size[0] / width, merge * image.size[1] / height
            windows = []
            for top in range(0, rows, side):
                for left in range(0, columns, side):
                    r, c = min(side, rows - top), min(side, columns - left)
                    boxes = box_grid(r, c, cell_w, cell_h, left=left * cell_w, top=top * cell_h)
                    windows.append(ImageGrid(r, c, boxes, label=f"window {top // side},{left // side}", fold=merge))
            found.append(windows)
        return found

    return grids
