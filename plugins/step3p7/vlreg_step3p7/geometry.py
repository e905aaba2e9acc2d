"""Where a Step 3.7 image token sits in its image (`step3p7_image_grids`).

``Step3p7ImageProcessor`` squashes each image whole into its global view (``size``, square),
whose tokens are a ``size / 56`` square grid (14-pixel patches, 4 x 4 a token), in raster
order, after any local crops' (refused: `vision.Step3p7Vision.image_refusal`). A token's box
is its square of the view, stretched back over the original image. A near-degenerate image
(its short side under 32 pixels and over 4 times shorter than its long side) is first padded
at its right or bottom to a square of its long side: the view covers that square, and a token
over the padding alone is a NaN row.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, clip_boxes


def _padded_to_square(width: int, height: int) -> bool:
    """The processor's rule for padding an image to a square before its resize."""
    return min(width, height) < 32 and max(width / height, height / width) > 4


def step3p7_image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """One grid per image: the global view's tokens over the whole image."""
    vision = processor.image_processor
    side = vision.size["height"] // (vision.vision_patch_size * vision.downsampler_stride)
    grids = []
    for image in images:
        width, height = image.size
        if _padded_to_square(width, height):
            square = max(width, height)
            boxes = clip_boxes(box_grid(side, side, square / side, square / side), width, height)
        else:
            boxes = box_grid(side, side, width / side, height / side)
        grids.append(ImageGrid(side, side, boxes, fold=vision.downsampler_stride))
    return grids
