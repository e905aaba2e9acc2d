"""Where an Aria image token lies over its image (`vlreg_image_grids`).

Aria's projector (``model.multi_modal_projector``) holds learned queries that cross-attend
every patch of a frame (``nn.MultiheadAttention``), so an image's tokens are those queries,
as many a frame as ``projector_patch_to_query_dict`` gives its patches, and no query owns a
patch: each frame's grid is one row of them (`ImageGrid.resampled`), every token's box the
part of the original image the frame shows. The image processor makes the frames, each
``max_image_size`` (490 or 980) a side:

1. without ``split_image``, the image is one frame; with it, the image is resized, keeping
   its aspect, to fit the best of ``split_resolutions`` (a canvas of whole frames), centred
   on it with padding, and the canvas is cut into crops of ``max_image_size`` a side at
   most, in raster order (a crop can be the whole canvas, narrower than a frame);
2. each crop is resized so its longer side is ``max_image_size`` (the other at least
   ``min_image_size``) and padded at the right and bottom to a square frame;
3. the tower and the queries read every patch that holds any of the crop's own pixels.

So a frame shows all of its crop: its box is the crop's part of the image, mapped back
through the canvas's resize (a crop wholly over the canvas's padding shows none: NaN).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from vlreg.plugin import ImageGrid, clip_boxes


def crops(processor: Any, width: int, height: int) -> list[tuple[float, float, float, float]]:
    """The part of the original image each crop holds, ``(x0, y0, x1, y1)``, in the order the
    processor makes the crops (before clipping: a crop's padding lies outside the image)."""
    from transformers.image_processing_utils import select_best_resolution

    side = processor.max_image_size
    if not processor.split_image:
        return [(0.0, 0.0, float(width), float(height))]
    canvas_height, canvas_width = select_best_resolution((height, width), processor.split_resolutions)
    scale_x, scale_y = canvas_width / width, canvas_height / height
    if scale_x < scale_y:  # transformers' get_patch_output_size: the tighter side fills the canvas
        shown_width, shown_height = canvas_width, min(math.ceil(height * scale_x), canvas_height)
    else:
        shown_width, shown_height = min(math.ceil(width * scale_y), canvas_width), canvas_height
    left, top = (canvas_width - shown_width) // 2, (canvas_height - shown_height) // 2
    x_back, y_back = width / shown_width, height / shown_height
    found = []
    for y in range(0, canvas_height, side):
        for x in range(0, canvas_width, side):
            x1, y1 = min(x + side, canvas_width), min(y + side, canvas_height)
            found.append(((x - left) * x_back, (y - top) * y_back, (x1 - left) * x_back, (y1 - top) * y_back))
    return found


def image_grids(processor: Any, size: tuple[int, int], queries: int) -> list[ImageGrid]:
    """The grids of one image of ``size`` (width, height): a row of ``queries`` tokens a
    crop, each over the crop's part of the image."""
    width, height = size
    grids = []
    for index, crop in enumerate(crops(processor, width, height)):
        box = clip_boxes(torch.tensor([crop], dtype=torch.float64), width, height)
        label = f"crop_{index + 1}" if processor.split_image else "image"
        grids.append(ImageGrid(1, queries, box.expand(queries, 4), label, fold=None))
    return grids


def aria_image_grids(config: Any):
    """``vlreg_image_grids`` for ``aria``: the queries a frame from the config, the crops
    from the processor's settings."""
    patch, per_patches = config.vision_config.patch_size, config.projector_patch_to_query_dict

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        settings = processor.image_processor
        queries = per_patches[(settings.max_image_size // patch) ** 2]
        return [image_grids(settings, image.size, queries) for image in images]

    return grids
