"""Where an Apertus 1.5 image token sits in its image (`vlreg_image_grids`).

The processor resizes each image to its own size, both sides multiples of the cell
(``spatial_scale_factor`` pixels, a code each) within its pixel bounds, and reports it in
``image_sizes`` (height, width); the padding a batch adds, bottom and right, is cut off
before the encoder runs. Each image is one raster of codes, row by row: the end-of-line
token between rows is no image token, so the grid has exactly ``rows x columns`` tokens.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def image_grids(config: Any):
    """``vlreg_image_grids`` for Apertus 1.5: each image's raster of codes."""
    cell = config.vision_config.spatial_scale_factor

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        found = []
        for (height, width), image in zip(encoding["image_sizes"].tolist(), images):
            rows, columns = int(height) // cell, int(width) // cell
            boxes = box_grid(rows, columns, cell * image.size[0] / width, cell * image.size[1] / height)
            found.append(ImageGrid(rows, columns, boxes, label="codes"))
        return found

    return grids
