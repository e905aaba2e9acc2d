"""Where an image token of a timm-tower family sits in its image (`vlreg_image_grids`).

**Perception LM.** The image processor (``vision_input_type="thumb+tile"``) squeezes the
whole image onto one ``tile_size`` square, the thumbnail, and onto a canvas of ``columns`` x
``rows`` tiles chosen by its own rule (`PerceptionLMImageProcessor._fit_image_to_canvas`, else
the closest supported aspect), the aspect not kept and nothing padded, then cuts the canvas
into tiles in raster order; the thumbnail comes first, then the tiles. Each crop runs through
the tower alone, and the projector's pooling averages each ``fold`` x ``fold`` block of its
patches into one token (``fold = projector_pooling_ratio``), in raster order, so a crop is
``side`` x ``side`` tokens, ``side = tile_size // patch_size // fold``. An image is one grid
``"thumbnail"`` over the whole image, then one per tile (``"tile r,c"``), each token's box its
cell scaled back to the original image; with any other ``vision_input_type``, one crop
(``"image"``). Consecutive images' tokens have no marker between them, so the crops are
counted by the processor's rule, and the host checks the total against the encoding.

**FastVLM.** LLaVA's processor over CLIP's image processor: the shortest edge resized to
``size["shortest_edge"]`` (the aspect kept), then a centre crop of ``crop_size``; the tower's
last grid has a cell per ``patch_size`` pixels of the crop (the processor's ``patch_size``,
FastViT's total stride), a token per cell in raster order. The boxes are the cells mapped
back through the crop and the resize, cut to the image: the crop's margins are in no box.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from vlreg.plugin import ImageGrid, box_grid, clip_boxes, frame_grids, tile_grids


def tiling(processor: Any, width: int, height: int) -> tuple[int, int] | None:
    """The (columns, rows) of tiles Perception LM's image processor cuts a ``width`` x
    ``height`` image into, or ``None`` where it takes the image as one crop."""
    vision = processor.image_processor
    if vision.vision_input_type != "thumb+tile":
        return None
    found = vision._fit_image_to_canvas(img_width=width, img_height=height, tile_size=vision.tile_size)
    return found or vision._find_closest_aspect_ratio(img_width=width, img_height=height, tile_size=vision.tile_size)


def perception_lm_grids(config: Any):
    """``vlreg_image_grids`` for Perception LM: the thumbnail, then the tiles."""
    fold = config.projector_pooling_ratio

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        side = processor.image_processor.tile_size // processor.patch_size // fold
        found = []
        for image in images:
            width, height = image.size
            whole = box_grid(side, side, width / side, height / side)
            arrangement = tiling(processor, width, height)
            if arrangement is None:
                found.append([ImageGrid(side, side, whole, label="image", fold=fold)])
                continue
            columns, rows = arrangement
            found.append([ImageGrid(side, side, whole, label="thumbnail", fold=fold),
                          *tile_grids(width, height, columns, rows, side, fold)])
        return found

    return grids


def perception_lm_video_grids(config: Any):
    """``vlreg_video_grids`` for Perception LM: each frame resized whole to a tile, its patches
    pooled ``projector_pooling_ratio`` x ``projector_pooling_ratio`` a token, frame by frame."""
    fold = config.projector_pooling_ratio

    def grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list:
        side = processor.video_processor.size["height"] // processor.patch_size // fold
        return [frame_grids(video, side, side, fold=fold) for video in videos]

    return grids


def _resized(vision: Any, height: int, width: int) -> tuple[int, int]:
    """The (height, width) CLIP's image processor resizes an image of this size to."""
    from transformers.image_transforms import get_resize_output_image_size
    from transformers.image_utils import ChannelDimension

    if not vision.do_resize:
        return height, width
    shape = np.broadcast_to(np.zeros((), dtype=np.uint8), (1, height, width))
    size = vision.size["shortest_edge"] if "shortest_edge" in vision.size else (vision.size["height"], vision.size["width"])
    return tuple(get_resize_output_image_size(shape, size=size, default_to_square=False,
                                              input_data_format=ChannelDimension.FIRST))


def _crop_start(side: int, crop: int) -> int:
    """Where a centre crop of ``crop`` starts on a side of ``side`` pixels (negative: the
    processor pads the side first, the smaller half before it)."""
    return int((side - crop) / 2.0) if crop <= side else -((crop - side) // 2)


def fast_vlm_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
    """``vlreg_image_grids`` for FastVLM: a token per cell of the tower's last grid over the crop."""
    vision, patch = processor.image_processor, processor.patch_size
    found = []
    for image in images:
        width, height = image.size
        new_height, new_width = _resized(vision, height, width)
        crop_height, crop_width = (vision.crop_size["height"], vision.crop_size["width"]) if vision.do_center_crop \
            else (new_height, new_width)
        top, left = _crop_start(new_height, crop_height), _crop_start(new_width, crop_width)
        x_scale, y_scale = width / new_width, height / new_height
        rows, columns = crop_height // patch, crop_width // patch
        boxes = box_grid(rows, columns, patch * x_scale, patch * y_scale, left * x_scale, top * y_scale)
        found.append(ImageGrid(rows, columns, clip_boxes(boxes, width, height)))
    return found
