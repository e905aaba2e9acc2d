"""Where a VipLLaVA image token sits in its image (`vlreg_image_grids`).

CLIP's image processor resizes the image so its shorter side is the tower's side
(keeping the aspect; transformers' own helper computes the size, as the processor does),
then cuts the centred square the tower sees. The tower splits that square into patches,
and the projector drops the class token, so the tokens are the patches in raster order:
each covers a square of the crop, mapped back to the original image by the resize's
scale. The parts of the image outside the crop are covered by no token.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from vlreg.plugin import ImageGrid, box_grid


def resized(vision: Any, width: int, height: int) -> tuple[int, int]:
    """The (height, width) the processor resizes a ``width`` x ``height`` image to."""
    from transformers.image_transforms import get_resize_output_image_size
    from transformers.image_utils import ChannelDimension

    if not vision.do_resize:
        return height, width
    shape = np.broadcast_to(np.zeros((), dtype=np.uint8), (1, height, width))
    return tuple(get_resize_output_image_size(
        shape, size=vision.size.shortest_edge, default_to_square=False, input_data_format=ChannelDimension.FIRST
    ))


def image_grids(config: Any) -> Callable:
    patch = config.vision_config.patch_size

    def grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        vision = processor.image_processor
        found = []
        for image in images:
            width, height = image.size
            new_height, new_width = resized(vision, width, height)
            crop_height, crop_width = vision.crop_size.height, vision.crop_size.width
            if crop_height > new_height or crop_width > new_width:
                raise ValueError("this grid assumes the crop lies inside the resized image, as CLIP's settings make it")
            top, left = int((new_height - crop_height) / 2.0), int((new_width - crop_width) / 2.0)
            x_scale, y_scale = width / new_width, height / new_height
            rows, columns = crop_height // patch, crop_width // patch
            boxes = box_grid(rows, columns, patch * x_scale, patch * y_scale, left * x_scale, top * y_scale)
            found.append(ImageGrid(rows, columns, boxes))
        return found

    return grids
