"""Where a NemotronH Omni image token sits in its image (`vlreg_image_grids`).

The image processor resizes each image, whole and without keeping its aspect, to a grid
of ``rows`` x ``columns`` patches (``image_grid_hw``, both even, within its patch
budget); there is no tiling. The wrapper's pixel shuffle folds each ``fold`` x ``fold``
block of patches into one token (``fold = 1 / downsample_ratio``), in raster order, so an
image is one `ImageGrid` of ``rows / fold`` x ``columns / fold`` tokens, each covering
its cell of the resized image scaled back to the original.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def nemotron_image_grids(config: Any):
    fold = round(1 / config.downsample_ratio)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        found = []
        for (rows, columns), image in zip(encoding["image_grid_hw"].tolist(), images):
            width, height = image.size
            tokens_down, tokens_across = rows // fold, columns // fold
            boxes = box_grid(tokens_down, tokens_across, width / tokens_across, height / tokens_down)
            found.append(ImageGrid(tokens_down, tokens_across, boxes, fold=fold))
        return found

    return grids
