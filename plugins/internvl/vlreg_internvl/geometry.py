"""Where an InternVL image token sits in its image (`vlreg_image_grids`).

The processor (GOT-OCR2's, with ``crop_to_patches``) picks a grid of ``columns`` x ``rows``
tiles whose aspect is closest to the image's, squeezes the whole image onto that canvas
(no padding, aspect not kept) and cuts it into tiles the tower's size; with more than one
tile it adds the whole image squeezed into one tile, the thumbnail, after them. Each tile
runs through the tower alone, and the pixel shuffle folds each ``fold`` x ``fold`` block
of its patches into one token (``fold = 1 / downsample_ratio``), in raster order. So an
image is, in sequence order, one `ImageGrid` per tile (``"tile r,c"``), then the
thumbnail's (``"thumbnail"``), each ``side`` x ``side`` tokens with ``fold`` set, and
since only resizes lie between the image and a tile, a token's box is its cell of the
tile scaled back: every box covers pixels, and each grid covers its part of the image
exactly.
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, tile_grids

#: The tiling settings and where the processor takes them from.
SETTINGS = ("crop_to_patches", "min_patches", "max_patches")


def tiling(processor: Any) -> dict[str, Any]:
    """The image processor's tiling settings as a call with no options runs them: the
    processor's own defaults (InternVLProcessor turns ``crop_to_patches`` on) over the
    image processor's."""
    found = {name: getattr(processor.image_processor, name) for name in SETTINGS}
    defaults = getattr(processor, "images_kwargs", {}) or {}
    found.update({name: value for name, value in defaults.items() if name in SETTINGS})
    return found


def tile_grid(processor: Any, width: int, height: int) -> tuple[int, int]:
    """The (columns, rows) of tiles the processor cuts a ``width`` x ``height`` image into."""
    from transformers.models.got_ocr2.image_processing_got_ocr2 import get_optimal_tiled_canvas

    settings, size = tiling(processor), processor.image_processor.size
    if not settings["crop_to_patches"] or settings["max_patches"] <= 1:
        return 1, 1
    return get_optimal_tiled_canvas((height, width), (size.height, size.width), settings["min_patches"], settings["max_patches"])


def internvl_image_grids(config: Any):
    """``vlreg_image_grids`` for InternVL: per image, its tiles' grids, then the thumbnail's."""
    tower = config.vision_config
    fold = round(1 / config.downsample_ratio)
    side = tower.image_size[0] // tower.patch_size[0] // fold

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        found = []
        for image in images:
            width, height = image.size
            columns, rows = tile_grid(processor, width, height)
            one = tile_grids(width, height, columns, rows, side, fold)
            if rows * columns > 1:
                one.append(ImageGrid(side, side, box_grid(side, side, width / side, height / side), label="thumbnail", fold=fold))
            found.append(one)
        return found

    return grids
