"""Where a Step 3.7 image token sits in its image (`step3p7_image_grids`).

``Step3p7ImageProcessor`` squashes each image whole into its global view (``size``, square),
whose tokens are a ``size / 56`` square grid (14-pixel patches, 4 x 4 a token), in raster
order, after any local crops' (refused: `vision.Step3p7Vision.image_refusal`). A token's box
is its square of the view, stretched back over the original image.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def step3p7_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image: the global view's tokens over the whole image."""
    vision = processor.image_processor
    side = vision.size["height"] // (vision.vision_patch_size * vision.downsampler_stride)
    grids = []
    for image in images:
        width, height = image.size
        grids.append(ImageGrid(side, side, box_grid(side, side, width / side, height / side),
                               fold=vision.downsampler_stride))
    return grids
