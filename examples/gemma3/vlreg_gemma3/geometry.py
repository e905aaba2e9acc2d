"""Where a Gemma 3 image token sits in its image (`vlreg_image_grids`).

The processor resizes each image whole to the tower's square (896 x 896 on the real
checkpoints; no crop, no padding), SigLIP cuts it into a raster of patches (64 x 64),
and the projector average-pools that raster to ``mm_tokens_per_image`` tokens (16 x 16),
so each token is a 4 x 4 block of patches: the grid's ``fold``. A token covers an equal
share of the original image, since the resize is a plain scaling.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from vlreg.plugin import ImageGrid, box_grid


def image_grids(config: Any) -> Callable:
    side = math.isqrt(config.mm_tokens_per_image)
    patches = config.vision_config.image_size // config.vision_config.patch_size

    def grids(encoding: Any, images: Any, processor: Any) -> list[ImageGrid]:
        if getattr(processor.image_processor, "do_pan_and_scan", False):
            raise ValueError("pan-and-scan crops have no declared geometry here: load with do_pan_and_scan=False")
        return [
            ImageGrid(side, side, box_grid(side, side, image.size[0] / side, image.size[1] / side), fold=patches // side)
            for image in images
        ]

    return grids
