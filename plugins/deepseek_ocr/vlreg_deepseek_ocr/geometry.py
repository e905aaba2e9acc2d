"""Where a DeepSeek-OCR 2 image token sits in its image (`vlreg_image_grids`).

The processor writes each image as its local tiles' tokens (where it cut any), then its
global view's, then one ``view_separator`` row, which the model appends and which covers
no pixels (a NaN box, as LLaVA-NeXT's newline tokens). Every token is a learned query that
attends its whole view (`ImageGrid.resampled`), so a grid is one row of queries, each boxed
with its view's part of the image:

* a tile: the image is squeezed onto ``columns`` x ``rows`` tiles (the processor's tiling
  rule), so tile ``(r, c)`` stands for that cell of the original image;
* the global view: the image scaled to the view's side and padded to a square, so it stands
  for the whole image (the padding covers none of it).

The token counts are the processor's: ``ceil(side / (patch_size * downsample_ratio))``
squared a view, the global view at ``size``, a tile at ``tile_size``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid


def _queries(processor: Any, side: int) -> int:
    return math.ceil(side / processor.patch_size / processor.downsample_ratio) ** 2


def _row(queries: int, box: tuple[float, float, float, float], label: str) -> ImageGrid:
    return ImageGrid(1, queries, torch.tensor([box], dtype=torch.float64).expand(queries, 4), label, fold=None)


def image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """``vlreg_image_grids``: each image's tiles, global view and separator."""
    from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

    settings = processor.image_processor
    tiles = encoding["num_local_patches"]
    tiles = tiles.tolist() if hasattr(tiles, "tolist") else list(tiles)
    found = []
    for image, crops in zip(images, tiles):
        width, height = image.size
        grids = []
        if crops:
            tile = settings.tile_size
            columns, rows = get_optimal_tiled_canvas((height, width), (tile, tile), settings.min_patches,
                                                     settings.max_patches)
            if columns * rows != crops:
                raise ValueError(
                    f"the processor cut a {width} x {height} image into {crops} tiles, but its tiling rule gives "
                    f"{columns} x {rows}: the image processor's settings are not the ones it ran with"
                )
            cell_w, cell_h = width / columns, height / rows
            grids += [_row(_queries(processor, tile), (c * cell_w, r * cell_h, (c + 1) * cell_w, (r + 1) * cell_h),
                           f"tile {r},{c}") for r in range(rows) for c in range(columns)]
        grids.append(_row(_queries(processor, settings.size.height), (0.0, 0.0, width, height), "global"))
        grids.append(ImageGrid(1, 1, torch.full((1, 4), float("nan")), "view separator", fold=None))
        found.append(grids)
    return found
