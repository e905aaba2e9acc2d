"""How Ovis 2's image tokens lie over the image: the processor resizes it to its square
``size``, the tower cuts that into patches, and the head folds each ``hidden_stride`` x
``hidden_stride`` block of patches into one token (the grid's ``fold``), in raster order:
``image_seq_length`` tokens, a square.

With ``crop_to_patches`` the processor also cuts crops, written after the whole image's
tokens between structure tokens; their geometry is not declared, so it is refused by name."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from vlreg import Unavailable
from vlreg.plugin import ImageGrid, box_grid


def image_grids(config: Any) -> Callable:
    fold = config.vision_config.hidden_stride

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        if getattr(processor.image_processor, "crop_to_patches", False):
            raise Unavailable("vision.geometry is unavailable: Ovis 2's crops have no declared geometry; load the "
                              "processor with crop_to_patches=False (its default)")
        side = math.isqrt(processor.image_seq_length)
        return [ImageGrid(side, side, box_grid(side, side, image.size[0] / side, image.size[1] / side), fold=fold)
                for image in images]

    return grids
