"""Where a LLaVA or LLaVA-NeXT image token sits in its image (`vlreg_image_grids`).

The tower sees a fixed square of pixels, made by the image processor from the original
image with a chain of steps each of which maps coordinates linearly: LLaVA's optional pad
to a square, a resize (to a fixed size, or the shortest edge to a size, keeping the
aspect), a centre crop. A `Frame` is that chain run backwards, so a patch's box on the
tower's square maps back to the original image exactly; the sizes each step produces are
computed with transformers' own helpers, as the processor computes them.

* LLaVA: one grid, the tower's patch grid, after the tokens the strategy keeps in front of
  it (CLIP's CLS row under "full"; "default" drops it). Under a centre crop the boxes cover
  only the cropped part of the image.
* LLaVA-NeXT: the base image (the whole image squeezed to the tower's square) as one grid;
  then the tiles: the image is resized into the best of ``image_grid_pinpoints`` keeping its
  aspect, centred on that canvas over padding and cut into tower-sized tiles; the model
  lays the tiles' patch grids side by side, drops the token rows (or columns) it counts as
  padding, and ends every row with a newline token, which covers no pixels. Tokens the
  model keeps but that lie wholly on the processor's padding cover no pixels either.
* LLaVA-OneVision: NeXT's grids, and where the unpadded tiles hold more tokens than
  ``vision_aspect_ratio`` (``anyres_max_N``) allows (by a factor above 1.1 in area's square
  root), the model shrinks their grid bilinearly to ``int(rows // ratio)`` x
  ``int(columns // ratio)``: a token of the shrunk grid covers its cell's share of the
  unpadded tiles (the source tokens bilinear mixes lie inside it). An image that shares its
  prompt's images with others (``batch_num_images`` above 1: images given as a list per
  prompt) is not tiled: it is padded to a square, resized to one tile and followed by one
  newline token, so its grids are that tile and the newline.
* LLaVA over the Pixtral tower (Pixtral-12B): no fixed square; the tower is
  vlreg-mistral3's, and so is the layout (each image at its own size, a token per patch,
  rows ended by ``[IMG_BREAK]``), taken from its adapter ``"pixtral_image_grids"`` at
  ``fold = 1``. Where it cannot be served (the adapter not installed, the "default"
  strategy dropping a patch of the packed row, a tiling wrapper) the grids refuse,
  saying why.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Sequence

import numpy as np
import torch
from attrs import frozen

from vlreg.plugin import ImageGrid, Unavailable, VideoGrid, adapter, box_grid, clip_boxes, frame_size


@frozen
class Frame:
    """Coordinates on a processed canvas mapped back to the canvas before the steps:
    ``x_before = x * x_scale + left``, ``y_before = y * y_scale + top``."""

    x_scale: float = 1.0
    y_scale: float = 1.0
    left: float = 0.0
    top: float = 0.0

    def then(self, later: "Frame") -> "Frame":
        """The frame of this step followed by ``later`` (``later`` maps back first)."""
        return Frame(
            later.x_scale * self.x_scale,
            later.y_scale * self.y_scale,
            later.left * self.x_scale + self.left,
            later.top * self.y_scale + self.top,
        )

    def back(self, boxes: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor([self.x_scale, self.y_scale, self.x_scale, self.y_scale], dtype=boxes.dtype)
        shift = torch.tensor([self.left, self.top, self.left, self.top], dtype=boxes.dtype)
        return boxes * scale + shift


def _shape(height: int, width: int) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype=np.uint8), (1, height, width))


def _sizes(size: Any) -> Any:
    """A processor's size as a ``SizeDict`` (an image processor of the older kind, as
    Video-LLaVA's, keeps a plain dict)."""
    from transformers.image_utils import SizeDict

    return SizeDict(**size) if isinstance(size, dict) else size


def resized(size: Any, height: int, width: int) -> tuple[int, int]:
    """The (height, width) the processor's ``resize`` gives an image of this size."""
    from transformers.image_transforms import get_resize_output_image_size, get_size_with_aspect_ratio
    from transformers.image_utils import ChannelDimension, get_image_size_for_max_height_width

    size = _sizes(size)
    if size.shortest_edge and size.longest_edge:
        return tuple(get_size_with_aspect_ratio((height, width), size.shortest_edge, size.longest_edge))
    if size.shortest_edge:
        return tuple(get_resize_output_image_size(
            _shape(height, width), size=size.shortest_edge, default_to_square=False, input_data_format=ChannelDimension.FIRST
        ))
    if size.max_height and size.max_width:
        return tuple(get_image_size_for_max_height_width((height, width), size.max_height, size.max_width))
    return size.height, size.width


def resize_and_crop(processor: Any, height: int, width: int) -> tuple[Frame, int, int]:
    """The processor's resize then centre crop, as LLaVA's and NeXT's image processors run
    them (each if switched on): the frame back to the input and the output's size."""
    frame = Frame()
    if processor.do_resize:
        new_height, new_width = resized(processor.size, height, width)
        frame = Frame(width / new_width, height / new_height)
        height, width = new_height, new_width
    if getattr(processor, "do_center_crop", False):
        crop = _sizes(processor.crop_size)
        crop_height, crop_width = crop.height, crop.width
        pad_left = (crop_width - width) // 2 if crop_width > width else 0
        pad_top = (crop_height - height) // 2 if crop_height > height else 0
        left = int((max(width, crop_width) - crop_width) / 2.0) - pad_left
        top = int((max(height, crop_height) - crop_height) / 2.0) - pad_top
        frame = frame.then(Frame(left=left, top=top))
        height, width = crop_height, crop_width
    return frame, height, width


def _square(processor: Any, height: int, width: int) -> tuple[Frame, int, int]:
    """LlavaImageProcessor's pad to a square, centred (when ``do_pad``)."""
    if not (getattr(processor, "do_pad", False) and hasattr(processor, "pad_to_square")) or height == width:
        return Frame(), height, width
    side = max(height, width)
    return Frame(left=-((side - width) // 2), top=-((side - height) // 2)), side, side


def _leading(processor: Any) -> list[ImageGrid]:
    """The tokens in front of the patch grid the strategy keeps (CLIP's CLS under "full")."""
    extra = getattr(processor, "num_additional_image_tokens", 0) - (processor.vision_feature_select_strategy == "default")
    return [ImageGrid(1, extra, torch.full((extra, 4), float("nan")), label="cls")] if extra > 0 else []


def _patches(frame: Frame, height: int, width: int, patch: int, image: Any) -> torch.Tensor:
    """The tower's patch boxes on a ``height`` x ``width`` canvas, mapped back through
    ``frame`` to the original image and cut to it."""
    boxes = box_grid(height // patch, width // patch, patch, patch)
    return clip_boxes(frame.back(boxes), *image.size)


def llava_image_grids(config: Any):
    """``vlreg_image_grids`` for LLaVA (``llava``, and Video-LLaVA's images), LLaVA-NeXT
    (``llava_next``, and LLaVA-NeXT-Video's images) and LLaVA-OneVision
    (``llava_onevision``), over any tower they host."""
    patch = config.vision_config.patch_size
    if config.vision_config.model_type == "pixtral":
        return _pixtral(config)

    def plain(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        vision = processor.image_processor
        found = []
        for image in images:
            width, height = image.size
            padded, height, width = _square(vision, height, width)
            cropped, height, width = resize_and_crop(vision, height, width)
            boxes = _patches(padded.then(cropped), height, width, patch, image)
            found.append(_leading(processor) + [ImageGrid(height // patch, width // patch, boxes)])
        return found

    def next_(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        return [_next_grids(config, processor, image, patch) for image in images]

    def onevision(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
        counts = encoding.get("batch_num_images")
        counts = [1] * len(images) if counts is None else counts.tolist()
        tiled = [count == 1 for count in counts for _ in range(count)]  # as the processor and model decide
        return [
            _next_grids(config, processor, image, patch) if alone else _one_square(processor, image, patch)
            for image, alone in zip(images, tiled)
        ]

    return {"llava_next": next_, "llava_next_video": next_, "llava_onevision": onevision}.get(config.model_type, plain)


def next_image_grids(config: Any, patch: int):
    """LLaVA-NeXT's grids (the base image, then the unpadded tiles with a newline token ending
    each row) where each token covers a ``patch``-pixel square of a tile: published as the
    adapter ``"next_image_grids"`` for wrappers that pool the tower's patches before the
    NeXT layout (Granite 4 Vision: ``patch_size`` over its ``downsample_rate``)."""
    return lambda encoding, images, processor: [_next_grids(config, processor, image, patch) for image in images]


def _pixtral(config: Any):
    """LLaVA's grids over the Pixtral tower: the tower plugin's, one token per patch, or a
    function that refuses with the reason."""
    reason = None
    if config.model_type != "llava":
        reason = f"{config.model_type!r} over the Pixtral tower is not worked out (only llava, Pixtral-12B's layout, is)"
    elif config.vision_feature_select_strategy != "full":
        reason = (
            f"vision_feature_select_strategy={config.vision_feature_select_strategy!r} drops the first patch "
            "of Pixtral's packed row (it has no class token), so the image tokens do not match the patches"
        )
    else:
        try:
            return adapter("pixtral_image_grids")(config.vision_config.patch_size)
        except LookupError as error:
            reason = str(error)

    def refuse(encoding: Any, images: Sequence[Any], processor: Any) -> list[ImageGrid]:
        raise Unavailable(f"vision.geometry is unavailable: {reason}")

    return refuse


def _one_square(processor: Any, image: Any, patch: int) -> list[ImageGrid]:
    """OneVision's image among several: padded to a square, resized to one tile, then a
    newline token."""
    vision = processor.image_processor
    width, height = image.size
    padded, side, _ = _square(vision, height, width)
    cropped, tile_h, tile_w = resize_and_crop(vision, side, side)
    boxes = _patches(padded.then(cropped), tile_h, tile_w, patch, image)
    newline = ImageGrid(1, 1, torch.full((1, 4), float("nan")), label="newline")
    return [ImageGrid(tile_h // patch, tile_w // patch, boxes, label="base"), newline]


def _next_grids(config: Any, processor: Any, image: Any, patch: int) -> list[ImageGrid]:
    from transformers.image_processing_utils import get_patch_output_size, select_best_resolution
    from transformers.image_utils import ChannelDimension

    vision = processor.image_processor
    width, height = image.size
    size = vision.size
    square = (size.height, size.width) if size.height and size.width else (size.shortest_edge, size.shortest_edge)
    squeeze = Frame(width / square[1], height / square[0])
    cropped, side_h, side_w = resize_and_crop(vision, *square)
    base_boxes = _patches(squeeze.then(cropped), side_h, side_w, patch, image)
    base = ImageGrid(side_h // patch, side_w // patch, base_boxes, label="base")

    best_h, best_w = select_best_resolution((height, width), vision.image_grid_pinpoints)
    fit_h, fit_w = get_patch_output_size(_shape(height, width), (best_h, best_w), ChannelDimension.FIRST)
    x_scale, y_scale = width / fit_w, height / fit_h
    fitted = Frame(x_scale, y_scale, -((best_w - fit_w) // 2) * x_scale, -((best_h - fit_h) // 2) * y_scale)
    tile = vision.crop_size.height if vision.crop_size and vision.crop_size.height else (size.height or size.shortest_edge)
    in_tile, tile_h, tile_w = resize_and_crop(vision, tile, tile)
    per_tile = config.vision_config.image_size // patch
    tiles_h, tiles_w = best_h // config.vision_config.image_size, best_w // config.vision_config.image_size
    rows, columns = _unpadded(height, width, tiles_h * per_tile, tiles_w * per_tile)
    kept_h, kept_w = _shrunk(config, len(rows), len(columns), per_tile)
    # each kept token's cell in the tiles' token grid (fractional where the grid was shrunk)
    step_h, step_w = len(rows) / max(kept_h, 1), len(columns) / max(kept_w, 1)  # none kept: no cells
    r0 = rows.start + torch.arange(kept_h, dtype=torch.float64)[:, None].expand(kept_h, kept_w).reshape(-1) * step_h
    c0 = columns.start + torch.arange(kept_w, dtype=torch.float64)[None, :].expand(kept_h, kept_w).reshape(-1) * step_w
    ty, tx = torch.div(r0, per_tile, rounding_mode="floor"), torch.div(c0, per_tile, rounding_mode="floor")
    cell_h, cell_w = tile_h / per_tile, tile_w / per_tile  # the cell's corners on its tile, then on the canvas
    y0, x0 = (r0 - ty * per_tile) * cell_h, (c0 - tx * per_tile) * cell_w
    on_tile = in_tile.back(torch.stack([x0, y0, x0 + step_w * cell_w, y0 + step_h * cell_h], -1))
    on_canvas = on_tile + torch.stack([tx, ty, tx, ty], -1) * tile
    boxes = clip_boxes(fitted.back(on_canvas), width, height).reshape(kept_h, kept_w, 4)
    boxes = torch.cat([boxes, torch.full((kept_h, 1, 4), float("nan"), dtype=torch.float64)], 1)
    tiles = ImageGrid(kept_h, kept_w + 1, boxes.reshape(-1, 4), label="tiles")
    return _leading(processor) + [base, tiles]


def _shrunk(config: Any, rows: int, columns: int, per_tile: int) -> tuple[int, int]:
    """The unpadded tiles' token grid as OneVision's ``pack_image_features`` leaves it:
    shrunk where it holds more than ``anyres_max_N`` tiles' worth (NeXT keeps it)."""
    aspect = getattr(config, "vision_aspect_ratio", None)
    if config.model_type != "llava_onevision" or not aspect:
        return rows, columns
    ratio = math.sqrt(rows * columns / (int(aspect.strip("anyres_max_")) * per_tile**2))
    return (int(rows // ratio), int(columns // ratio)) if ratio > 1.1 else (rows, columns)


def _unpadded(height: int, width: int, grid_h: int, grid_w: int) -> tuple[range, range]:
    """The token rows and columns of the tiles' grid the model keeps, as its
    ``unpad_image`` decides from the original size."""
    if width / height > grid_w / grid_h:
        kept = int(round(height * (grid_w / width), 7))
        pad = (grid_h - kept) // 2
        return range(pad, grid_h - pad), range(grid_w)
    kept = int(round(width * (grid_h / height), 7))
    pad = (grid_w - kept) // 2
    return range(grid_h), range(pad, grid_w - pad)


def next_video_grids(config: Any):
    """``vlreg_video_grids`` for LLaVA-NeXT-Video: each frame resized and centre-cropped as its
    video processor does, its patches pooled ``spatial_pool_stride`` x ``spatial_pool_stride``
    a token (``vision_resampler``), frame by frame; the boxes cover the crop of the frame."""
    patch, stride = config.vision_config.patch_size, config.spatial_pool_stride

    def grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
        found = []
        for video in videos:
            width, height = frame_size(video[0])
            cropped, side_h, side_w = resize_and_crop(processor.video_processor, height, width)
            rows, columns = side_h // patch // stride, side_w // patch // stride
            boxes = clip_boxes(cropped.back(box_grid(rows, columns, patch * stride, patch * stride)), width, height)
            found.append([VideoGrid(rows, columns, boxes, fold=stride, frames=(k, k)) for k in range(len(video))])
        return found

    return grids


def video_llava_video_grids(config: Any):
    """``vlreg_video_grids`` for Video-LLaVA: each frame resized and centre-cropped as its video
    processor does and run whole through the video tower, every row of which the projector
    reads, frame by frame: the class rows first (``num_additional_image_tokens``, over no
    pixels), then the patches, whose boxes cover the crop of the frame."""
    patch = config.vision_config.patch_size

    def grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
        extra, found = processor.num_additional_image_tokens, []
        for video in videos:
            width, height = frame_size(video[0])
            cropped, side_h, side_w = resize_and_crop(processor.video_processor, height, width)
            boxes = _patches(cropped, side_h, side_w, patch, SimpleNamespace(size=(width, height)))
            frames = []
            for k in range(len(video)):
                if extra:
                    frames.append(VideoGrid(1, extra, torch.full((extra, 4), float("nan")), frames=(k, k), label="cls"))
                frames.append(VideoGrid(side_h // patch, side_w // patch, boxes, frames=(k, k)))
            found.append(frames)
        return found

    return grids
