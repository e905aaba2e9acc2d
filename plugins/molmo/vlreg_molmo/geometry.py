"""Where a Molmo 2 image token sits in its image (`molmo2_image_grids`).

``Molmo2ImageProcessor`` gives each image two views, both squashed over the whole image:

* the low-resolution view, the image resized to one crop (``size``), ``size / patch_size``
  patches a side;
* the high-resolution canvas, the image resized to a tiling of overlapping crops
  (``compute_crop_geometry``), whose patches the processor keeps once each where crops
  overlap (``overlap_margins``): ``canvas / patch_size`` patches a side.

Each view's patch raster is cut into ``pooling_size`` windows, padded with no patch at both
ends where the raster does not divide (half before, the rest after, as ``arange_for_pooling``
does); a token is the adapter's cross-attention pooling of its window's patches, read from the
tower's crops through ``image_token_pooling``. A token's box is its window's patches over the
original image. The tokens are no block of one crop's patches (the canvas's crops overlap), so
the grids are resampled (``fold=None``): no token owns tower patches. The prompt holds the
low-resolution tokens first, then the canvas's, each in raster order.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid


def _windows(patches: int, pool: int) -> list[tuple[int, int]]:
    """The patch range each pooling window covers along one side of ``patches`` patches."""
    windows = -(-patches // pool)
    before = (windows * pool - patches) // 2
    return [(max(0, i * pool - before), min(patches, (i + 1) * pool - before)) for i in range(windows)]


def _pooled(rows: int, columns: int, pool: Sequence[int], width: int, height: int, label: str) -> ImageGrid:
    """The grid of a view of ``rows`` x ``columns`` patches stretched over a ``width`` x
    ``height`` image, pooled ``pool`` (height, width) windows at a time."""
    down, across = _windows(rows, pool[0]), _windows(columns, pool[1])
    dy, dx = height / rows, width / columns
    boxes = torch.tensor([[x0 * dx, y0 * dy, x1 * dx, y1 * dy] for y0, y1 in down for x0, x1 in across],
                         dtype=torch.float64)
    return ImageGrid(len(down), len(across), boxes, label=label, fold=None)


def molmo2_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """Per image, its low-resolution view's grid, then its canvas's."""
    from transformers.models.molmo2.image_processing_molmo2 import compute_crop_geometry

    vision = processor.image_processor
    crop, patch, pool = vision.size["height"], vision.patch_size, vision.pooling_size
    found = []
    for image in images:
        width, height = image.size
        _, _, canvas_height, canvas_width = compute_crop_geometry(height, width, vision.max_crops,
                                                                  vision.overlap_margins, crop, patch)
        found.append([_pooled(crop // patch, crop // patch, pool, width, height, "low resolution"),
                      _pooled(canvas_height // patch, canvas_width // patch, pool, width, height, "crops")])
    return found
