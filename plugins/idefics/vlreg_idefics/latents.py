"""Idefics2: a perceiver's latents as the image tokens, and where each lies over its image.

Idefics2's connector (``model.connector``, the `projector`) maps every patch of a frame
into the text width (``modality_projection``), then a perceiver resampler
(``perceiver_resampler``) lets ``resampler_n_latents`` learned latents cross-attend that
frame's patches and each other, for ``resampler_depth`` blocks. Its output, one row per
latent, is what ``self.inputs_merger`` writes at the image tokens, so
`Vision.image_features` is the connector's output in frame order, and ``projector.output``
reshaped is exactly it.

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

from vlreg.plugin import ImageGrid, Unavailable, Vision, clip_boxes

#: The crops' labels, in the order the processor makes them; the whole image is "global".
CROPS = ("top_left", "top_right", "bottom_left", "bottom_right")


class Idefics2Vision(Vision):
    """The Idefics2 tower: the SigLIP layout, on frames of each image's own size. Its
    processor loads every image through transformers' ``load_image``, which takes PIL
    images only. A batch's frames are padded to the largest (a split image's crops to the
    whole image's frame), and the tower masks the padding's patches."""

    takes_arrays = False
    padded_patches = True

    @property
    def image_size(self) -> int:
        raise Unavailable(
            "vision.image_size is unavailable: Idefics2's processor keeps each image's aspect (its sides "
            "between shortest_edge and longest_edge) and pads a batch's frames to the largest; each frame's "
            "pixels are in the encoding's pixel_attention_mask, and its tokens' boxes in vision.geometry"
        )


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


def image_grids(processor: Any, size: tuple[int, int], patch: int, latents: int) -> list[ImageGrid]:
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
        return [image_grids(processor.image_processor, image.size, patch, latents) for image in images]

    return grids
