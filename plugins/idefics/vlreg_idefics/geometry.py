"""Where an Idefics3 or SmolVLM image token sits in its image (`vlreg_image_grids`).

The image processor makes frames of one size, ``tile`` x ``tile`` pixels
(``max_image_size["longest_edge"]``), from each image:

1. it resizes the image so its longest edge is ``size["longest_edge"]``, the other edge
   keeping the aspect (rounded down, then up to even), both capped at 4096;
2. with ``do_image_splitting``, it resizes that again to a canvas whose sides are
   multiples of ``tile`` and, if the canvas is larger than one tile, cuts it into
   ``rows`` x ``columns`` tiles, in raster order, followed by the whole canvas squeezed to
   one tile (the global image); a canvas of one tile is that one frame. Without
   splitting, the image is squeezed to one tile.

Each resize maps the whole image onto the whole canvas, so a point of a tile maps back
to the original image linearly. The tower cuts a frame into ``patch``-pixel patches, and
the connector's pixel shuffle folds each ``scale_factor`` x ``scale_factor`` block of them
into one token, in raster order: a frame is a grid of ``(tile // patch) // scale_factor``
tokens a side (`ImageGrid.fold` = ``scale_factor``). The processor writes a tile's tokens
after ``<row_r_col_c>`` and the global image's after ``<global-img>``, in that order, so an
image's grids are its tiles in raster order, then the global image.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes

#: The processors' cap on a resized image's sides (``MAX_IMAGE_SIZE`` in transformers).
MAX_SIDE = 4096


def longest_edge_size(height: int, width: int, longest: int) -> tuple[int, int]:
    """The (height, width) the processor's ``resize`` to ``{"longest_edge": longest}`` gives:
    the longest edge set to ``longest``, the other kept in aspect (truncated, then made
    even), then both scaled under `MAX_SIDE` (truncated)."""
    aspect = width / height
    if width >= height:
        width, height = longest, int(longest / aspect)
        height += height % 2
    else:
        height, width = longest, int(longest * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    aspect = width / height
    if width >= height and width > MAX_SIDE:
        width, height = MAX_SIDE, int(MAX_SIDE / aspect)
    elif height > width and height > MAX_SIDE:
        height, width = MAX_SIDE, int(MAX_SIDE * aspect)
    return max(height, 1), max(width, 1)


def canvas_size(height: int, width: int, tile: int) -> tuple[int, int]:
    """The processor's ``resize_for_vision_encoder``: sides made multiples of ``tile``, the
    longer one first, the other from it through the aspect."""
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    return height, width


def split(processor: Any, height: int, width: int) -> tuple[int, int, int, int]:
    """``(rows, columns, canvas_height, canvas_width)`` for an image of this size: the
    tiles the processor cuts it into (0 x 0: one frame, the image squeezed to a tile) and
    the canvas they are cut from."""
    tile = processor.max_image_size["longest_edge"]
    size = processor.size
    if processor.do_resize:
        if size.longest_edge:
            height, width = longest_edge_size(height, width, size.longest_edge)
        elif size.height and size.width:
            height, width = size.height, size.width
    if not processor.do_image_splitting:
        return 0, 0, tile, tile
    height, width = canvas_size(height, width, tile)
    if height > tile or width > tile:
        return height // tile, width // tile, height, width
    return 0, 0, height, width


def image_grids(processor: Any, size: tuple[int, int], patch: int, fold: int) -> list[ImageGrid]:
    """The grids of one image of ``size`` (width, height): its tiles in raster order, then
    the global image, each ``side`` x ``side`` tokens of ``fold`` x ``fold`` patches."""
    width, height = size
    tile = processor.max_image_size["longest_edge"]
    rows, columns, canvas_height, canvas_width = split(processor, height, width)
    side = (tile // patch) // fold
    cell = patch * fold  # a token's side in a frame's pixels
    on_frame = box_grid(side, side, cell, cell)
    grids = []
    x_scale, y_scale = width / canvas_width, height / canvas_height
    for row in range(rows):
        for column in range(columns):
            boxes = (on_frame + torch.tensor([column * tile, row * tile] * 2, dtype=torch.float64)) * torch.tensor(
                [x_scale, y_scale] * 2, dtype=torch.float64
            )
            grids.append(ImageGrid(side, side, clip_boxes(boxes, width, height), f"row_{row + 1}_col_{column + 1}", fold))
    squeezed = on_frame * torch.tensor([width / tile, height / tile] * 2, dtype=torch.float64)
    grids.append(ImageGrid(side, side, clip_boxes(squeezed, width, height), "global", fold))
    return grids


def idefics_image_grids(config: Any):
    """``vlreg_image_grids`` for ``idefics3`` and ``smolvlm``: the patch side and the pixel
    shuffle's factor come from the config, the frames from the processor's settings."""
    patch, fold = config.vision_config.patch_size, config.scale_factor

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        return [image_grids(processor.image_processor, image.size, patch, fold) for image in images]

    return grids
