"""Where an Idefics3, SmolVLM or Idefics2 image token sits in its image (`vlreg_image_grids`).

Idefics3 and SmolVLM: the image processor makes frames of one size, ``tile`` x ``tile``
pixels (``max_image_size["longest_edge"]``), from each image:

1. it resizes the image so its longest edge is ``size["longest_edge"]``, the other edge
   keeping the aspect (rounded down, then up to even), both capped at 4096;
2. with ``do_image_splitting``, it resizes that again to a canvas whose sides are
   multiples of ``tile`` and, if the canvas is larger than one tile, cuts it into
   ``rows`` x ``columns`` tiles, in raster order, followed by the whole canvas squeezed to
   one tile (the global image); a canvas of one tile is that one frame. Without
   splitting, the image is squeezed to one tile.

Each resize maps the whole image onto the whole canvas, so a point of a tile maps back
to the original image linearly. The tower cuts a frame into ``patch``-pixel patches, and
the connector's pixel shuffle folds each ``scale_factor`` x ``scale_factor`` block of them
into one token, in raster order: a frame is a grid of ``(tile // patch) // scale_factor``
tokens a side (`ImageGrid.fold` = ``scale_factor``). The processor writes a tile's tokens
after ``<row_r_col_c>`` and the global image's after ``<global-img>``, in that order, so an
image's grids are its tiles in raster order, then the global image.

Idefics2: a perceiver's latents are the image tokens. Its connector (``model.connector``,
the `projector`) maps every patch of a frame into the text width
(``modality_projection``), then a perceiver resampler (``perceiver_resampler``) lets
``resampler_n_latents`` learned latents cross-attend that frame's patches and each other,
for ``resampler_depth`` blocks. Its output, one row per latent, is what
``self.inputs_merger`` writes at the image tokens, so `Vision.image_features` is the
connector's output in frame order, and ``projector.output`` reshaped is exactly it.

A latent attends every patch of its frame and nothing of another frame, so no latent owns
patches: an image's grids are one per frame, each a row of ``resampler_n_latents`` tokens
(`ImageGrid.resampled`), and every token's box is the part of the original image its
frame's whole patches show. The image processor makes the frames:

1. with ``do_image_splitting`` it cuts the original image into 4 crops at its middle
   (``width // 2``, ``height // 2``), top left, top right, bottom left, bottom right, then
   appends the whole image; without, the whole image alone;
2. it resizes each frame on its own: a side over ``longest_edge`` brings the frame down
   to it, keeping the aspect (the other side truncated), then each side is raised to at
   least ``shortest_edge`` (the aspect is then lost), or to ``height`` x ``width``;
3. it pads a batch's frames at the right and bottom to the largest, and the tower masks
   every patch not wholly over the frame's own pixels, as the convolution drops a
   frame's last partial row and column of patches.

So a frame shows its ``patch * (side // patch)`` first pixels a side, mapped back onto
the original image linearly (a resize maps the whole frame onto the whole crop). A frame
with no whole patch shows nothing: its boxes are NaN.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, box_grid, clip_boxes

#: The processors' cap on a resized image's sides (``MAX_IMAGE_SIZE`` in transformers).
MAX_SIDE = 4096
#: The crops' labels, in the order the processor makes them; the whole image is "global".
CROPS = ("top_left", "top_right", "bottom_left", "bottom_right")


def longest_edge_size(height: int, width: int, longest: int) -> tuple[int, int]:
    """The (height, width) the processor's ``resize`` to ``{"longest_edge": longest}`` gives:
    the longest edge set to ``longest``, the other kept in aspect (truncated, then made
    even), then both scaled under `MAX_SIDE` (truncated)."""
    aspect = width / height
    if width >= height:
        width, height = longest, int(longest / aspect)
        height += height % 2
    else:
        height, width = longest, int(longest * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    aspect = width / height
    if width >= height and width > MAX_SIDE:
        width, height = MAX_SIDE, int(MAX_SIDE / aspect)
    elif height > width and height > MAX_SIDE:
        height, width = MAX_SIDE, int(MAX_SIDE * aspect)
    return max(height, 1), max(width, 1)


def canvas_size(height: int, width: int, tile: int) -> tuple[int, int]:
    """The processor's ``resize_for_vision_encoder``: sides made multiples of ``tile``, the
    longer one first, the other from it through the aspect."""
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    return height, width


def split(processor: Any, height: int, width: int) -> tuple[int, int, int, int]:
    """``(rows, columns, canvas_height, canvas_width)`` for an image of this size: the
    tiles the processor cuts it into (0 x 0: one frame, the image squeezed to a tile) and
    the canvas they are cut from."""
    tile = processor.max_image_size["longest_edge"]
    size = processor.size
    if processor.do_resize:
        if size.longest_edge:
            height, width = longest_edge_size(height, width, size.longest_edge)
        elif size.height and size.width:
            height, width = size.height, size.width
    if not processor.do_image_splitting:
        return 0, 0, tile, tile
    height, width = canvas_size(height, width, tile)
    if height > tile or width > tile:
        return height // tile, width // tile, height, width
    return 0, 0, height, width


def image_grids(processor: Any, size: tuple[int, int], patch: int, fold: int) -> list[ImageGrid]:
    """The grids of one image of ``size`` (width, height): its tiles in raster order, then
    the global image, each ``side`` x ``side`` tokens of ``fold`` x ``fold`` patches."""
    width, height = size
    tile = processor.max_image_size["longest_edge"]
    rows, columns, canvas_height, canvas_width = split(processor, height, width)
    side = (tile // patch) // fold
    cell = patch * fold  # a token's side in a frame's pixels
    on_frame = box_grid(side, side, cell, cell)
    grids = []
    x_scale, y_scale = width / canvas_width, height / canvas_height
    for row in range(rows):
        for column in range(columns):
            boxes = (on_frame + torch.tensor([column * tile, row * tile] * 2, dtype=torch.float64)) * torch.tensor(
                [x_scale, y_scale] * 2, dtype=torch.float64
            )
            grids.append(ImageGrid(side, side, clip_boxes(boxes, width, height), f"row_{row + 1}_col_{column + 1}", fold))
    squeezed = on_frame * torch.tensor([width / tile, height / tile] * 2, dtype=torch.float64)
    grids.append(ImageGrid(side, side, clip_boxes(squeezed, width, height), "global", fold))
    return grids


def idefics_image_grids(config: Any):
    """``vlreg_image_grids`` for ``idefics3`` and ``smolvlm``: the patch side and the pixel
    shuffle's factor come from the config, the frames from the processor's settings."""
    patch, fold = config.vision_config.patch_size, config.scale_factor

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        return [image_grids(processor.image_processor, image.size, patch, fold) for image in images]

    return grids


# -- Idefics2 ------------------------------------------------------------------


def resized(processor: Any, height: int, width: int) -> tuple[int, int]:
    """The (height, width) the image processor resizes a frame of this size to."""
    size = processor.size
    if not processor.do_resize:
        return height, width
    if size.shortest_edge and size.longest_edge:
        low, high = size.shortest_edge, size.longest_edge
        aspect = width / height
        if width >= height and width > high:
            width, height = high, int(high / aspect)
        elif height > width and height > high:
            height, width = high, int(high * aspect)
        return max(height, low), max(width, low)
    return size.height, size.width


def frames(processor: Any, width: int, height: int) -> list[tuple[str, tuple[int, int, int, int]]]:
    """The frames of an image of this size, in the processor's order: each one's label and
    the box ``(x0, y0, x1, y1)`` of the original image it is made from."""
    whole = ("global", (0, 0, width, height))
    if not processor.do_image_splitting:
        return [whole]
    middle_x, middle_y = width // 2, height // 2
    corners = [(0, 0, middle_x, middle_y), (middle_x, 0, width, middle_y),
               (0, middle_y, middle_x, height), (middle_x, middle_y, width, height)]
    return [*zip(CROPS, corners), whole]


def shown(processor: Any, crop: tuple[int, int, int, int], patch: int) -> torch.Tensor:
    """The box of the original image a frame made from ``crop`` shows the tower: its whole
    patches, mapped back through the frame's resize; NaN where it has none."""
    x0, y0, x1, y1 = crop
    height, width = resized(processor, y1 - y0, x1 - x0)
    seen_x, seen_y = patch * (width // patch), patch * (height // patch)
    box = torch.tensor([[x0, y0, x0 + seen_x * (x1 - x0) / width, y0 + seen_y * (y1 - y0) / height]],
                       dtype=torch.float64)
    return box if seen_x and seen_y else torch.full((1, 4), math.nan, dtype=torch.float64)


def latent_grids(processor: Any, size: tuple[int, int], patch: int, latents: int) -> list[ImageGrid]:
    """The grids of one image of ``size`` (width, height): a row of ``latents`` tokens per
    frame, in the processor's order, every token's box its frame's."""
    width, height = size
    grids = []
    for label, crop in frames(processor, width, height):
        box = clip_boxes(shown(processor, crop, patch), width, height)
        grids.append(ImageGrid(1, latents, box.expand(latents, 4), label, fold=None))
    return grids


def idefics2_image_grids(config: Any):
    """``vlreg_image_grids`` for ``idefics2``: the patch side and the latents from the
    config, the frames from the processor's settings."""
    patch, latents = config.vision_config.patch_size, config.perceiver_config.resampler_n_latents

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        return [latent_grids(processor.image_processor, image.size, patch, latents) for image in images]

    return grids


def idefics1_image_grids(config: Any):
    """``vlreg_image_grids`` for ``idefics`` (IDEFICS 1): its processor stretches each image to
    a square of ``image_size``, and the perceiver resamples it to ``resampler_n_latents``
    latents, so an image's positions are those latents, each over the whole image
    (`ImageGrid.resampled`)."""
    latents = config.perceiver_config.resampler_n_latents

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        found = []
        for image in images:
            box = torch.tensor([[0, 0, *image.size]], dtype=torch.float64)
            found.append([ImageGrid(1, latents, box.expand(latents, 4), "latents", fold=None)])
        return found

    return grids
