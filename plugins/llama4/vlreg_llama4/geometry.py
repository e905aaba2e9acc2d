"""Where a Llama 4 image token lies over its image.

The Llama 4 image processor picks a canvas of ``rows`` x ``columns`` tiles of
``size`` pixels (at most ``max_patches`` tiles, the canvas the image fits best without
distortion), resizes the image onto it keeping its aspect (so it fills the canvas from
the top-left corner and the rest is black padding), and cuts the canvas into tiles.
Where there is more than one tile it adds a global image: the whole image stretched to
one tile. The tower runs on each tile alone, and the pixel shuffle folds each 2 x 2
block of a tile's patches (``1 / pixel_shuffle_ratio``) into one token, in raster
order: a tile is a square grid of tokens, ``fold = 2``.

In the prompt the tiles come first, in raster order (``<|tile_x_separator|>`` between
tiles of a row, ``<|tile_y_separator|>`` after each row), then ``<|image|>`` and the global
image's tokens; with one tile, only ``<|image|>`` and that tile's. The features fill the
``<|patch|>`` tokens, so an image's grids are its tiles', then the global image's. A
token over the padding alone covers no pixels (NaN); one over the image's edge is cut
to it.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def tiling(image_size: tuple[int, int], image_processor: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """The processor's choice for an image of ``(height, width)``: the canvas in tiles
    ``(rows, columns)`` and the size the image is resized to on it ``(height, width)``,
    worked out with the image processor's own functions and settings."""
    from transformers.image_utils import SizeDict
    from transformers.models.llama4.image_processing_llama4 import (
        find_supported_resolutions,
        get_best_fit,
        get_max_res_without_distortion,
    )

    side = image_processor.size["height"]
    canvases = torch.tensor(find_supported_resolutions(image_processor.max_patches, SizeDict(height=side, width=side)))
    target = [int(t) for t in get_best_fit(image_size, canvases, resize_to_max_canvas=image_processor.resize_to_max_canvas)]
    limit = target
    if not image_processor.resize_to_max_canvas:  # no enlarging past one tile
        limit = [min(max(image_size[0], side), target[0]), min(max(image_size[1], side), target[1])]
    height, width = get_max_res_without_distortion(image_size, limit)
    return (target[0] // side, target[1] // side), (max(height, 1), max(width, 1))


def llama4_image_grids(config: Any):
    """The `vlreg_image_grids` function for a Llama 4 config."""
    vision = config.vision_config
    fold = round(1 / vision.pixel_shuffle_ratio)

    def grids(encoding: Any, images: list, processor: Any) -> list[list[ImageGrid]]:
        side = processor.image_processor.size["height"]
        tokens = side // vision.patch_size // fold
        cell = side / tokens
        found = []
        for image in images:
            width, height = image.size
            (rows, columns), (new_height, new_width) = tiling((height, width), processor.image_processor)
            scale_x, scale_y = width / new_width, height / new_height
            tiles = []
            for r in range(rows):
                for c in range(columns):
                    boxes = box_grid(tokens, tokens, cell * scale_x, cell * scale_y, c * side * scale_x, r * side * scale_y)
                    label = "image" if rows * columns == 1 else f"tile {r},{c}"
                    tiles.append(ImageGrid(tokens, tokens, clip_boxes(boxes, width, height), label=label, fold=fold))
            if rows * columns > 1:
                tiles.append(ImageGrid(tokens, tokens, box_grid(tokens, tokens, width / tokens, height / tokens),
                                       label="global", fold=fold))
            found.append(tiles)
        return found

    return grids
