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

from vlreg.plugin import ImageGrid, clip_boxes


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


def _cells(rows: int, columns: int, width: float, height: float, left: float = 0.0, top: float = 0.0,
           scale_x: float = 1.0, scale_y: float = 1.0) -> torch.Tensor:
    """A ``rows`` x ``columns`` raster of equal cells over a ``width`` x ``height`` frame whose
    origin is (``left``, ``top``) in frame pixels, scaled back onto the image, each row
    ended by a newline cell (NaN)."""
    x = torch.arange(columns + 1, dtype=torch.float64) * width / columns
    y = torch.arange(rows + 1, dtype=torch.float64) * height / rows
    boxes = torch.stack([((x[:-1] - left) * scale_x).repeat(rows), ((y[:-1] - top) * scale_y).repeat_interleave(columns),
                         ((x[1:] - left) * scale_x).repeat(rows), ((y[1:] - top) * scale_y).repeat_interleave(columns)], -1)
    boxes = boxes.view(rows, columns, 4)
    return torch.cat([boxes, torch.full((rows, 1, 4), math.nan, dtype=torch.float64)], 1).view(-1, 4)


def unlimited_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """``vlreg_image_grids``: each image's tiles (one raster over the tiled canvas, a newline
    ending each row), its global view (the same), the separator. A token is a cell of SAM's
    grid after its two stride-2 convolutions; the global view is the image scaled to ``size``
    and padded to a square (centred), or, with ``crop_to_patches=False`` at most
    ``maximum_pad_value`` pixels, squeezed onto the square."""
    settings = processor.image_processor
    side = max(settings.size.height, settings.size.width)
    local = math.ceil(settings.tile_size // processor.patch_size / processor.downsample_ratio)
    global_ = math.ceil(side // processor.patch_size / processor.downsample_ratio)
    found = []
    for image, crops, (columns, rows) in zip(images, encoding["num_local_patches"], encoding["patches_grid"]):
        width, height = image.size
        grids = []
        if crops:
            across, down = columns * local, rows * local
            grids.append(ImageGrid(down, across + 1, clip_boxes(_cells(down, across, width, height), width, height),
                                   "tiles"))
        squeezed = not settings.crop_to_patches and side <= settings.maximum_pad_value
        if squeezed:
            boxes = _cells(global_, global_, width, height)
        else:
            scale = side / max(width, height)
            shown_w, shown_h = round(width * scale), round(height * scale)
            boxes = _cells(global_, global_, side, side, (side - shown_w) // 2, (side - shown_h) // 2,
                           width / shown_w, height / shown_h)
        grids.append(ImageGrid(global_, global_ + 1, clip_boxes(boxes, width, height), "global"))
        grids.append(ImageGrid(1, 1, torch.full((1, 4), math.nan), "view separator"))
        found.append(grids)
    return found
