"""Where each position of Mllama's cross-attention states lies in its image.

Mllama's image processor, for an image of ``width`` x ``height`` and tiles of ``tile``
pixels (``size``), with at most ``max_image_tiles`` tiles:

1. picks an arrangement of ``rows`` x ``columns`` tiles (the encoding's
   ``aspect_ratio_ids`` say which) and so a canvas of ``rows * tile`` x ``columns * tile``;
2. resizes the image, keeping its aspect, so it fits that canvas (each side first held
   between ``tile`` and the canvas's side, then the tighter of the two scales wins and the
   other side is rounded down); the image sits in the canvas's top left corner, zeros
   pad the rest;
3. cuts the canvas into its tiles in raster order, and pads the image's tiles with empty
   ones up to ``max_image_tiles``.

The tower gives each tile a class token followed by its ``(tile // patch)`` squared
patches in raster order, and the states keep that layout: per image, ``max_image_tiles``
runs of ``1 + patches`` positions. An image's grids follow it: for each real tile, its
class token (a 1 x 1 grid that covers no pixels of its own: NaN) and its patches; then
each padding tile as one row of positions over no pixels.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def arrangements(max_tiles: int) -> list[tuple[int, int]]:
    """Every (rows, columns) of at most ``max_tiles`` tiles, in the order the processor's
    ``aspect_ratio_ids`` count them from 1."""
    return [(a, b) for a in range(1, max_tiles + 1) for b in range(1, max_tiles + 1) if a * b <= max_tiles]


def fitted(height: int, width: int, canvas_height: int, canvas_width: int, tile: int) -> tuple[int, int]:
    """The (height, width) the processor resizes an image to, to fit its canvas."""
    target_height = min(max(height, tile), canvas_height)
    target_width = min(max(width, tile), canvas_width)
    if target_width / width < target_height / height:
        return min(math.floor(height * target_width / width) or 1, target_height), target_width
    return target_height, min(math.floor(width * target_height / height) or 1, target_width)


def image_grids(size: tuple[int, int], arrangement: tuple[int, int], tile: int, patch: int, max_tiles: int) -> list[ImageGrid]:
    """One image's grids, in the states' order (see the module)."""
    width, height = size
    rows, columns = arrangement
    new_height, new_width = fitted(height, width, rows * tile, columns * tile, tile)
    side = tile // patch
    x_scale, y_scale = width / new_width, height / new_height
    nowhere = torch.full((1, 4), math.nan)
    grids = []
    for r in range(rows):
        for c in range(columns):
            boxes = box_grid(side, side, patch * x_scale, patch * y_scale, c * tile * x_scale, r * tile * y_scale)
            grids.append(ImageGrid(1, 1, nowhere, label=f"tile {r},{c} class token"))
            grids.append(ImageGrid(side, side, clip_boxes(boxes, width, height), label=f"tile {r},{c}"))
    for index in range(rows * columns, max_tiles):
        grids.append(ImageGrid(1, 1 + side * side, torch.full((1 + side * side, 4), math.nan), label=f"padding tile {index}"))
    return grids


def mllama_image_grids(config: Any):
    """`vlreg_image_grids` for Mllama: the grids of each image, in the order given."""
    vision = config.vision_config

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        image_processor = processor.image_processor
        tile, max_tiles = image_processor.size["height"], image_processor.max_image_tiles
        ratios = arrangements(max_tiles)
        placeholders = (encoding["input_ids"] == config.image_token_id).nonzero().tolist()
        found = []
        for image, (row, _) in zip(images, placeholders):
            nth = sum(1 for r, _ in placeholders[: len(found)] if r == row)
            arrangement = ratios[int(encoding["aspect_ratio_ids"][row, nth]) - 1]
            found.append(image_grids(image.size, arrangement, tile, vision.patch_size, max_tiles))
        return found

    return grids
