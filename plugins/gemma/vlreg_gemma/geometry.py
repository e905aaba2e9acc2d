"""Where a Gemma image token sits in its image (`vlreg_image_grids`).

Three processors, each a plain scaling of the whole image (no crop, no padding of pixels),
so every token covers an equal share of the original image:

* **a square** (Gemma 3, PaliGemma): the image is resized whole to the tower's square
  (``image_processor.size``: 896 x 896 on Gemma 3, 224, 448 or 896 on PaliGemma), which
  SigLIP cuts into ``n`` x ``n`` patches. PaliGemma's tokens are those patches; Gemma 3's
  projector average-pools them to ``mm_tokens_per_image`` tokens (16 x 16 of 64 x 64),
  so each token is a ``fold`` x ``fold`` block of patches (4 on the real checkpoints).
* **a square under a convolutional tower** (Gemma 3n): the image is resized whole to the
  processor's square (768 x 768 on the published checkpoints); MobileNetV5's fusion adapter
  leaves a ``k`` x ``k`` grid (16 x 16), a token per cell, each an equal share of the image.
* **an aspect-preserving resize** (Gemma 4, Gemma 4 unified): the image is scaled to the
  largest size whose sides are whole ``k * patch_size`` pixel blocks and whose patches fit
  the budget (``max_soft_tokens * k**2``), computed here with transformers' own helper as
  the processor computes it. A token is one ``k`` x ``k`` block of patches, in raster
  order: pooled from them by the Gemma 4 tower (``fold`` = ``k``), embedded whole by Gemma 4
  unified, which has no tower (``fold`` = 1).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from vlreg.plugin import ImageGrid, Unavailable, box_grid


def square_grids(config: Any) -> Callable:
    """Gemma 3 and PaliGemma: one grid per image over the tower's square."""
    patches = config.vision_config.image_size // config.vision_config.patch_size
    tokens = getattr(config, "mm_tokens_per_image", None) or patches**2  # PaliGemma: a token per patch
    side = math.isqrt(tokens)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        if getattr(processor.image_processor, "do_pan_and_scan", False):
            raise Unavailable(
                "vision.geometry is unavailable: pan-and-scan crops have no declared geometry; "
                "load the processor with do_pan_and_scan=False"
            )
        return [
            ImageGrid(side, side, box_grid(side, side, image.size[0] / side, image.size[1] / side), fold=patches // side)
            for image in images
        ]

    return grids


def resized(processor: Any, width: int, height: int) -> tuple[int, int]:
    """The (height, width) the Gemma 4 processors resize a ``width`` x ``height`` image to."""
    from transformers.models.gemma4.image_processing_gemma4 import get_aspect_ratio_preserving_size

    vision = processor.image_processor
    k = vision.pooling_kernel_size
    return get_aspect_ratio_preserving_size(
        height=height, width=width, patch_size=vision.patch_size,
        max_patches=vision.max_soft_tokens * k**2, pooling_kernel_size=k,
    )


def aspect_grids(config: Any) -> Callable:
    """Gemma 4 (``fold`` = k: the tower pools k x k patches) and Gemma 4 unified (``fold``
    = 1: each token is embedded whole)."""
    pooled = config.model_type == "gemma4"

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        vision = processor.image_processor
        cell = vision.pooling_kernel_size * vision.patch_size
        found = []
        for image in images:
            width, height = image.size
            target_h, target_w = resized(processor, width, height)
            rows, columns = target_h // cell, target_w // cell
            boxes = box_grid(rows, columns, cell * width / target_w, cell * height / target_h)
            found.append(ImageGrid(rows, columns, boxes, fold=vision.pooling_kernel_size if pooled else 1))
        return found

    return grids


def soft_token_grids(config: Any) -> Callable:
    """Gemma 3n: the fusion adapter's ``k`` x ``k`` grid (``vision_soft_tokens_per_image``
    tokens) over the whole image, resized to the processor's square."""
    side = math.isqrt(config.vision_soft_tokens_per_image)

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        return [ImageGrid(side, side, box_grid(side, side, image.size[0] / side, image.size[1] / side))
                for image in images]

    return grids


#: wrapper model_type -> its grids (else `square_grids`)
GRIDS = {"gemma4": aspect_grids, "gemma4_unified": aspect_grids, "gemma3n": soft_token_grids}


def image_grids(config: Any) -> Callable:
    return GRIDS.get(config.model_type, square_grids)(config)
