"""Where a Granite-Docling image token sits in its image (`vlreg_image_grids`).

The image processor picks a grid of ``rows`` x ``columns`` tiles for each image from its tile
budget (``get_tile_grid``), resizes the whole image onto that many tiles of ``size`` pixels and
cuts them in raster order; where there are several, it appends the whole image squeezed to one
tile (the thumbnail). The tower cuts a tile into ``patch_size``-pixel patches, and the
connector's pixel shuffle folds each ``scale_factor`` x ``scale_factor`` block of them into one
token in raster order (half the factor, four times the tokens, on the fine path the processor
takes with ``fine_route=True``, which the encoding marks with ``tile_fine_mask``). The processor
writes each tile's tokens after ``<row_r_col_c>``, then the thumbnail's after ``<global-img>``,
so an image's grids are its tiles in raster order, then the thumbnail, each over its own
stretch of the original image (every resize maps the whole image onto the whole canvas).

Granite 4 Vision's (`granite4_grids`) are LLaVA-NeXT's: the base image, then the unpadded
crops with a newline token ending each row, each token a square of ``patch_size /
downsample_rate`` pixels of its crop.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from vlreg.plugin import ImageGrid, Unavailable, adapter, box_grid, tile_grids


def image_grids(config: Any):
    """``vlreg_image_grids`` for ``granite_docling``, from the tower's patch size and fold."""
    vision = config.vision_config

    def grids(encoding: Any, images: list, processor: Any) -> list[list[ImageGrid]]:
        fold = vision.scale_factor // 2 if "tile_fine_mask" in encoding else vision.scale_factor
        side = (vision.image_size // vision.patch_size) // fold
        found = []
        for picture in images:
            width, height = picture.size
            rows, columns = processor.image_processor.get_tile_grid(height, width)
            tiles = tile_grids(width, height, columns, rows, side, fold)
            if rows * columns > 1:
                tiles.append(ImageGrid(side, side, box_grid(side, side, width / side, height / side), "thumbnail",
                                       fold))
            found.append(tiles)
        return found

    return grids


def granite4_grids(config: Any):
    """LLaVA-NeXT's grids (vlreg-llava's adapter ``"next_image_grids"``), a token covering a
    square of ``patch_size / downsample_rate`` pixels of its tile."""
    side = config.vision_config.patch_size / Fraction(config.downsample_rate)
    if side.denominator != 1:
        def refuse(encoding: Any, images: Any, processor: Any) -> Any:
            raise Unavailable(f"vision.geometry is unavailable: a token covers {float(side)} pixels of a tile "
                              f"(patch_size / downsample_rate), not a whole number")
        return refuse
    return adapter("next_image_grids")(config, int(side))
