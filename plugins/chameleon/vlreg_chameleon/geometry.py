"""Where a Chameleon or Emu3 image token sits in its image (`vlreg_image_grids`).

An image token is one cell of the VQ encoder's grid, ``cell`` pixels a side of the image
the processor made (``2 ** (len(channel_multiplier) - 1)``), so an image is one grid:

* Chameleon's processor resizes the image's shorter side to ``size["shortest_edge"]``
  (the longer one in proportion, truncated), then crops the centre ``crop_size`` square:
  a grid of ``crop / cell`` x ``crop / cell`` codes, each box its cell moved back onto the
  image (the crop's offset added, the resize undone), cut to the image; a cell outside it
  (a crop larger than the resized image, padded) covers no pixels (NaN).
* Emu3's resizes each image to its own size, both sides multiples of the cell within its
  pixel bounds (``image_sizes`` in the encoding); the padding a batch adds, bottom and
  right, is cut off the codes. The wrapper ends each row of codes with an end-of-line
  token: ``rows x (columns + 1)`` tokens, the last column covering no pixels (NaN).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def _cell(config: Any) -> int:
    return 2 ** (len(config.vq_config.channel_multiplier) - 1)


def _side(size: Any, name: str) -> int:
    return int(size[name] if isinstance(size, dict) else getattr(size, name))


def chameleon_image_grids(config: Any):
    """``vlreg_image_grids`` for Chameleon: the centre crop's grid of cells."""
    cell = _cell(config)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        settings = processor.image_processor
        shortest, crop = _side(settings.size, "shortest_edge"), _side(settings.crop_size, "height")
        found = []
        for image in images:
            width, height = image.size
            resized = (int(shortest * width / height), shortest) if width >= height else (
                shortest, int(shortest * height / width))
            left, top = int((resized[0] - crop) / 2.0), int((resized[1] - crop) / 2.0)
            side = crop // cell
            scale = torch.tensor([resized[0] / width, resized[1] / height] * 2, dtype=torch.float64)
            boxes = box_grid(side, side, cell, cell, left, top) / scale
            found.append(ImageGrid(side, side, clip_boxes(boxes, width, height), label="codes"))
        return found

    return grids


def _line_ends(boxes: torch.Tensor, rows: int, columns: int) -> torch.Tensor:
    """``boxes`` of a ``rows x columns`` raster with a NaN box after each row."""
    ends = torch.full((rows, 1, 4), math.nan, dtype=boxes.dtype)
    return torch.cat([boxes.reshape(rows, columns, 4), ends], 1).reshape(-1, 4)


def emu3_image_grids(config: Any):
    """``vlreg_image_grids`` for Emu3: the codes' cells, each row ended by an end-of-line token."""
    cell = _cell(config)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        found = []
        for (height, width), image in zip(encoding["image_sizes"].tolist(), images):
            rows, columns = int(height) // cell, int(width) // cell
            boxes = box_grid(rows, columns, cell * image.size[0] / width, cell * image.size[1] / height)
            found.append(ImageGrid(rows, columns + 1, _line_ends(boxes, rows, columns), label="codes"))
        return found

    return grids
