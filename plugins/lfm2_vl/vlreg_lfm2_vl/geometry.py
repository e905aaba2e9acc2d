"""Where an LFM2-VL image token sits in its image (`vlreg_image_grids`).

The image processor (``Lfm2VlImageProcessor``) treats an image one of two ways:

* an image small enough for one crop (at most ``max_image_tokens`` tokens, times
  ``max_pixels_tolerance``), or any image where splitting is off (``min_tiles == max_tiles
  == 1``), is resized (its aspect kept as closely as whole tokens allow: ``smart_resize``,
  between ``min_image_tokens`` and ``max_image_tokens`` tokens) and is one grid (``"image"``);
* a larger one is squeezed onto a canvas of ``columns`` x ``rows`` tiles of ``tile_size``
  pixels (the aspect among ``min_tiles`` to ``max_tiles`` tiles closest to the image's; not
  padded, the aspect not kept), cut into them in raster order (``"tile r,c"``), and, with
  ``use_thumbnail``, followed by the whole image resized as a single crop would be
  (``"thumbnail"``).

Each crop's patches run through the tower alone, and the projector folds each 2 x 2 block
of them (``downsample_factor``) into one token, in raster order; every token's box is its
cell of its crop scaled back to the original image, and covers pixels. A crop is padded
after its patches to the longest a crop can be (NaFlex), and the padding is in no grid:
a grid's ``rows * fold`` x ``columns * fold`` patches are the crop's own
(``spatial_shapes``), the first of its row in the tower.

The tokens between the grids (``<|image_start|>``, each tile's ``<|img_row_R_col_C|>``,
``<|img_thumbnail|>``, ``<|image_end|>``) are not image tokens and are in no grid.

The grids follow the image processor's rule with the settings it ran with; each crop's
grid is checked against the shape the encoding gives it (``spatial_shapes``).
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid, tile_grids


def _crops(vision: Any, width: int, height: int) -> tuple[int, int, bool, tuple[int, int]]:
    """``(columns, rows, thumbnail, (thumbnail_h, thumbnail_w))`` of the processor's rule for
    a ``width`` x ``height`` image: ``columns`` x ``rows`` tiles (1 x 1: one crop, the whole
    image resized to ``(thumbnail_h, thumbnail_w)`` pixels)."""
    splitting = vision.do_image_splitting and not vision.min_tiles == vision.max_tiles == 1
    new_width, new_height = vision.smart_resize(height, width, vision.downsample_factor, vision.min_image_tokens,
                                                vision.max_image_tokens, vision.encoder_patch_size)
    large = vision._is_image_too_large(height, width, vision.max_image_tokens, vision.encoder_patch_size,
                                       vision.downsample_factor, vision.max_pixels_tolerance)
    if not (large and splitting):
        return 1, 1, False, (new_height, new_width)
    columns, rows, *_ = vision._get_grid_layout(height, width, vision.min_tiles, vision.max_tiles, vision.tile_size)
    return columns, rows, vision.use_thumbnail and columns * rows != 1, (new_height, new_width)


def image_grids(config: Any):
    """``vlreg_image_grids`` for LFM2-VL."""
    fold = config.downsample_factor

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        vision = processor.image_processor
        token = vision.encoder_patch_size * fold  # pixels of a resized crop a token covers, a side
        shapes = [tuple(shape) for shape in encoding["spatial_shapes"].tolist()]
        found, crop = [], 0
        for image in images:
            width, height = image.size
            columns, rows, thumbnail, (resized_h, resized_w) = _crops(vision, width, height)
            one = []
            if columns * rows == 1:
                one.append(_whole(resized_h // token, resized_w // token, width, height, "image", fold))
            else:
                side = vision.tile_size // token
                one.extend(tile_grids(width, height, columns, rows, side, fold))
                if thumbnail:
                    one.append(_whole(resized_h // token, resized_w // token, width, height, "thumbnail", fold))
            for grid in one:
                given = shapes[crop] if crop < len(shapes) else None
                if given != (grid.rows * fold, grid.columns * fold):
                    raise ValueError(
                        f"the processor gave crop {crop} ({grid.label} of a {width} x {height} image) a grid of "
                        f"{given} patches, but its rule gives {grid.rows * fold} x {grid.columns * fold}: the image "
                        f"processor's settings are not the ones it ran with"
                    )
                crop += 1
            found.append(one)
        if crop != len(shapes):
            raise ValueError(f"the processor made {len(shapes)} crops, but its rule gives {crop} for these images")
        return found

    return grids


def _whole(rows: int, columns: int, width: int, height: int, label: str, fold: int) -> ImageGrid:
    """The whole image resized to ``rows`` x ``columns`` tokens."""
    return ImageGrid(rows, columns, box_grid(rows, columns, width / columns, height / rows), label=label, fold=fold)
