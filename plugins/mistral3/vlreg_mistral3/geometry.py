"""Where a Mistral 3 image token lies over its image.

The Pixtral processor resizes each image (aspect kept, longest edge at most
``size["longest_edge"]``) and rounds each side up to a whole number of tokens of
``patch_size * spatial_merge_size`` pixels, stretching the image onto that canvas: the
``image_sizes`` it returns. A token is one ``spatial_merge_size`` x ``spatial_merge_size``
block of the tower's patches (Mistral 3's patch merger unfolds the grid in those
blocks, in raster order), so an image of ``rows`` x ``columns`` tokens is a raster of
equal cells over the original image, ``fold = spatial_merge_size``.

In the prompt each row of tokens is followed by ``[IMG_BREAK]`` and the last row by
``[IMG_END]`` instead; neither is an image token (the features fill ``[IMG]`` only), so
an image's positions skip one token after each row, and the grid is its ``[IMG]`` tokens.
A wrapper with no merge (LLaVA over Pixtral, Pixtral-12B) has the same layout at
``fold = 1``: `pixtral_image_grids` serves both.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import ImageGrid, box_grid


def pixtral_image_grids(patch: int, merge: int = 1):
    """A `vlreg_image_grids` function for a wrapper over the Pixtral tower whose tokens are
    ``merge`` x ``merge`` blocks of ``patch``-pixel patches (1: a patch is a token, LLaVA's
    Pixtral-12B). Published to other plugins as the adapter ``"pixtral_image_grids"``."""
    token = patch * merge

    def grids(encoding: Any, images: list, processor: Any) -> list[ImageGrid]:
        found = []
        for (height, width), image in zip(encoding["image_sizes"].tolist(), images):
            rows, columns = height // token, width // token
            cell_x, cell_y = token * image.size[0] / width, token * image.size[1] / height
            found.append(ImageGrid(rows, columns, box_grid(rows, columns, cell_x, cell_y), fold=merge))
        return found

    return grids


def mistral3_image_grids(config: Any):
    """The `vlreg_image_grids` function for a Mistral 3 config."""
    return pixtral_image_grids(config.vision_config.patch_size, config.spatial_merge_size)
