"""Where MiniCPM-V's image tokens sit: an image's source image, then its slices.

The image processor resizes each image whole (the source image) and, where it is larger than
``scale_resolution`` squared, also cuts a resize of it into ``rows`` x ``columns`` equal
slices (`get_sliced_grid`, `get_refine_size`); each is patched in raster order and its grid
of patches (``target_sizes``, one row per source image or slice, in that order) folded into
tokens: 4 x 4 patches a token (``downsample_mode="16x"``: the tower's ``vit_merger``, then the
projector's 2 x 2 merge), or 2 x 2 (``"4x"``: the projector's alone). The processor writes
the tokens in that order, the source image's first, then the slices' row by row, so an image
is a grid per source image and slice, each token's box the pixels of the original image its
patches cover (the resize undone).
"""

from __future__ import annotations

from typing import Any, Sequence

from vlreg.plugin import ImageGrid, box_grid


def fold(image_processor: Any) -> int:
    """Patches a token is on a side: 4 in ``"16x"`` mode, 2 in ``"4x"``."""
    return 2 if image_processor.downsample_mode == "4x" else 4


def image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """Each image's grids: its source image, then its slices in raster order (labelled
    ``"slice r,c"``)."""
    settings = processor.image_processor
    patch, side = settings.patch_size, fold(settings)
    sizes = encoding["target_sizes"].tolist()
    found, unit = [], 0
    for image in images:
        width, height = image.size
        cut = settings.get_sliced_grid((height, width), settings.max_slice_nums, settings.scale_resolution) \
            if settings.slice_mode else None
        rows, columns = cut if cut is not None else (0, 0)
        grids = [_grid(sizes[unit], patch, side, width, height, 0, 0, "source image")]
        for index in range(rows * columns):  # equal parts of a resize of the whole image
            r, c = divmod(index, columns)
            grids.append(_grid(sizes[unit + 1 + index], patch, side, width, height, c * width / columns,
                               r * height / rows, f"slice {r},{c}", slices=(rows, columns)))
        unit += 1 + rows * columns
        found.append(grids)
    return found


def _grid(size: list[int], patch: int, side: int, width: float, height: float, left: float, top: float, label: str,
          slices: tuple[int, int] = (1, 1)) -> ImageGrid:
    """A unit of ``size`` patches, ``side`` x ``side`` a token, over ``width`` x ``height``
    pixels of the original cut into ``slices`` (rows, columns), this unit's corner at
    (``left``, ``top``)."""
    rows, columns = size[0] // side, size[1] // side
    cell_w, cell_h = width / slices[1] / columns, height / slices[0] / rows
    return ImageGrid(rows, columns, box_grid(rows, columns, cell_w, cell_h, left, top), label=label, fold=side)
