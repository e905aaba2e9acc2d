"""Where a GOT-OCR 2.0 or PP-Chart2Table image token sits in its image (`vlreg_image_grids`).

The image processor squeezes the image onto the tower's square (no padding, the aspect not
kept), or, with ``crop_to_patches`` (GOT's image processor only), onto a canvas of
``columns`` x ``rows`` tiles of that square chosen by its tiling rule, cut into the tiles,
and the whole image squeezed into one more crop (the thumbnail) after them. Each crop runs
through the tower alone: ``image_size / patch_size`` patches a side, a grid the neck keeps;
the projector's two convolutions (3 x 3, stride 2, padding 1) each halve it (rounding up),
so a crop is ``side`` x ``side`` tokens in raster order (16 x 16 on the published
checkpoints, 64 x 64 patches).

The convolutions sample the grid at its even positions, so token ``t`` (along an axis) is
centred on patch ``4t`` (`receptive_field`: it reads the neck's output at patches ``4t - 3``
to ``4t + 3``), not on the middle of patches ``4t`` to ``4t + 3``. Its box is the stretch of
the crop nearer its centre than any other token's: patches ``4t - 1.5`` to ``4t + 2.5``, the
first token's from the crop's edge, the last token's to the other edge (`crop_boxes`),
scaled back onto the original image (a tile's onto its part of it); the boxes tile each
crop exactly. ``fold`` is the projector's stride, 4: `vlreg.analysis.tower_patterns` sums
a token's aligned 4 x 4 block of patches, which its box is 1.5 patches ahead of.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid

#: How many patches a side one token advances by: two convolutions of stride 2.
STRIDE = 4


def halved(side: int) -> int:
    """A grid's side after one 3 x 3 convolution of stride 2 and padding 1."""
    return (side + 2 - 3) // 2 + 1


def tokens_a_side(vision_config: Any) -> int:
    """A crop's tokens a side: the patch grid's side halved twice by the projector."""
    return halved(halved(vision_config.image_size // vision_config.patch_size))


def receptive_field(token: int, patches: int) -> range:
    """The neck-output patches (along one axis, of ``patches``) the projector's two
    convolutions combine into ``token`` along that axis."""
    return range(max(0, STRIDE * token - 3), min(patches, STRIDE * token + 4))


def crop_boxes(side: int, patches: int, width: float, height: float, left: float = 0.0,
               top: float = 0.0) -> torch.Tensor:
    """The boxes of a crop's ``side`` x ``side`` tokens over a ``patches``-a-side grid, the crop
    standing for ``width`` x ``height`` pixels from (``left``, ``top``), in raster order:
    each token's stretch nearest its centre (see the module)."""

    def edges(extent: float, start: float) -> tuple[torch.Tensor, torch.Tensor]:
        centre = STRIDE * torch.arange(side, dtype=torch.float64) + 0.5
        low, high = (centre - STRIDE / 2).clamp(0, patches), (centre + STRIDE / 2).clamp(0, patches)
        low[0], high[-1] = 0, patches
        return start + low * extent / patches, start + high * extent / patches

    (x0, x1), (y0, y1) = edges(width, left), edges(height, top)
    rows, columns = torch.arange(side).repeat_interleave(side), torch.arange(side).repeat(side)
    return torch.stack([x0[columns], y0[rows], x1[columns], y1[rows]], -1)


def image_grids(config: Any):
    """``vlreg_image_grids`` for both wrappers: each image's crops, each a grid of tokens."""
    tower = config.vision_config
    patches = tower.image_size // tower.patch_size
    side = tokens_a_side(tower)
    token = config.image_token_id

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        runs = _runs(encoding["input_ids"], token)
        if len(runs) != len(images):
            raise ValueError(
                f"the prompts hold {len(runs)} runs of image tokens, but {len(images)} images were given (a run an "
                f"image: a multi_page prompt's pages are one run, which is not served)"
            )
        found = []
        for image, tokens in zip(images, runs):
            width, height = image.size
            crops, left = divmod(tokens, side * side)
            if left or not crops:
                raise ValueError(
                    f"an image's {tokens} image tokens are not whole crops of {side} x {side}: the processor wrote "
                    f"another count than the tower makes (num_image_tokens= must be {side * side})"
                )
            if crops == 1:
                found.append([ImageGrid(side, side, crop_boxes(side, patches, width, height), fold=STRIDE)])
            else:
                found.append(_tiles(processor.image_processor, width, height, crops, side, patches))
        return found

    return grids


def _tiles(images: Any, width: int, height: int, crops: int, side: int, patches: int) -> list[ImageGrid]:
    """GOT's tiles in raster order, then the thumbnail."""
    from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

    size = images.size
    columns, rows = get_optimal_tiled_canvas((height, width), (size.height, size.width), images.min_patches,
                                             images.max_patches)
    if rows * columns != crops - 1:
        raise ValueError(
            f"the processor cut a {width} x {height} image into {crops - 1} tiles, but its tiling rule gives "
            f"{columns} x {rows}: the image processor's settings are not the ones it ran with"
        )
    tile_w, tile_h = width / columns, height / rows
    found = [ImageGrid(side, side, crop_boxes(side, patches, tile_w, tile_h, c * tile_w, r * tile_h),
                       label=f"tile {r},{c}", fold=STRIDE)
             for r in range(rows) for c in range(columns)]
    found.append(ImageGrid(side, side, crop_boxes(side, patches, width, height), label="thumbnail", fold=STRIDE))
    return found


def _runs(input_ids: Any, token: int) -> list[int]:
    """The lengths of the runs of ``token`` in each row, rows in order: a run an image."""
    counts = []
    for row in input_ids.tolist():
        run = 0
        for found in [*row, None]:
            if found == token:
                run += 1
            elif run:
                counts.append(run)
                run = 0
    return counts
