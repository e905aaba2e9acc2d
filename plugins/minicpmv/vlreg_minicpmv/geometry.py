"""Where MiniCPM-V's image and video tokens sit: an image's source image, then its slices.

The image processor resizes each image whole (the source image) and, where it is larger than
``scale_resolution`` squared, also cuts a resize of it into ``rows`` x ``columns`` equal
slices (`get_sliced_grid`, `get_refine_size`); each is patched in raster order and its grid
of patches (``target_sizes``, one row per source image or slice, in that order) folded into
tokens: 4 x 4 patches a token (``downsample_mode="16x"``: the tower's ``vit_merger``, then the
projector's 2 x 2 merge), or 2 x 2 (``"4x"``: the projector's alone). The processor writes
the tokens in that order, the source image's first, then the slices' row by row, so an image
is a grid per source image and slice, each token's box the pixels of the original image its
patches cover (the resize undone). The video processor cuts each frame it keeps (it samples
by default) the same way, frame after frame (``target_sizes_videos``), so a video is that, a
kept frame at a time.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Sequence

from vlreg.plugin import ImageGrid, Unavailable, VideoGrid, box_grid, frame_size, kept_frames


def fold(image_processor: Any) -> int:
    """Patches a token is on a side: 4 in ``"16x"`` mode, 2 in ``"4x"``."""
    return 2 if image_processor.downsample_mode == "4x" else 4


def image_grids(encoding: Any, images: Sequence[Any], processor: Any) -> list[list[ImageGrid]]:
    """Each image's grids: its source image, then its slices in raster order (labelled
    ``"slice r,c"``)."""
    settings = processor.image_processor
    sizes = encoding["target_sizes"].tolist()
    found, unit = [], 0
    for image in images:
        grids = _picture(settings, sizes[unit:], *image.size, "source image", ImageGrid)
        unit += len(grids)
        found.append(grids)
    return found


def video_grids(encoding: Any, videos: Sequence[Any], processor: Any) -> list[list[VideoGrid]]:
    """Each video's grids, kept frame by kept frame (`kept_frames`: the processor's sampling
    followed, each frame an index into the video as passed): the video processor cuts every
    frame as the image processor cuts an image, so a frame is its source frame (labelled
    ``"frame"``), then its slices, each grid over that frame alone. Stacked frames
    (``stack_frames`` > 1) are refused: the processor tiles each second's extra frames into
    one picture, lines between them, and resizes and slices that, so a token there can span
    two frames and has no box in any one frame passed."""
    settings = processor.video_processor
    if (settings.stack_frames or 1) > 1:
        raise Unavailable(
            f"vision.geometry(videos=...) is unavailable with stack_frames={settings.stack_frames}: MiniCPM-V's video "
            "processor tiles each second's extra frames into one picture, so a token there can cover parts of two "
            "frames and has no box in one frame; pass stack_frames=1 (each kept frame then read alone)")
    sizes = encoding["target_sizes_videos"].tolist()
    kept = [kept_frames(encoding, index, video) for index, video in enumerate(videos)]
    cuts = [_cut(settings, *frame_size(video[0])) for video in videos]
    expected = sum(len(frames) * (1 + rows * columns) for frames, (rows, columns) in zip(kept, cuts))
    if expected != len(sizes):
        raise ValueError(f"the video processor made {len(sizes)} source frames and slices, where cutting each kept "
                         f"frame makes {expected}: vlreg does not know this video processor's layout")
    found, unit = [], 0
    for video, frames in zip(videos, kept):
        grids = []
        for k in frames:
            one = _picture(settings, sizes[unit:], *frame_size(video[k]), "frame", partial(VideoGrid, frames=(k, k)))
            grids, unit = grids + one, unit + len(one)
        found.append(grids)
    return found


def _cut(settings: Any, width: int, height: int) -> tuple[int, int]:
    """The rows and columns of slices ``settings`` cut a picture into; ``(0, 0)``: none."""
    cut = settings.get_sliced_grid((height, width), settings.max_slice_nums, settings.scale_resolution) \
        if settings.slice_mode else None
    return tuple(cut) if cut is not None else (0, 0)


def _picture(settings: Any, sizes: list, width: int, height: int, label: str, kind: Callable) -> list:
    """One image's or frame's grids (``kind`` makes each): its source, then the slices
    ``settings`` cuts it into, from ``sizes`` (the processor's ``target_sizes`` rows, this
    picture's first)."""
    patch, side = settings.patch_size, fold(settings)
    rows, columns = _cut(settings, width, height)
    grids = [_grid(kind, sizes[0], patch, side, width, height, 0, 0, label)]
    for index in range(rows * columns):  # equal parts of a resize of the whole picture
        r, c = divmod(index, columns)
        grids.append(_grid(kind, sizes[1 + index], patch, side, width, height, c * width / columns,
                           r * height / rows, f"slice {r},{c}", slices=(rows, columns)))
    return grids


def _grid(kind: Callable, size: list[int], patch: int, side: int, width: float, height: float, left: float,
          top: float, label: str, slices: tuple[int, int] = (1, 1)) -> ImageGrid:
    """A unit of ``size`` patches, ``side`` x ``side`` a token, over ``width`` x ``height``
    pixels of the original cut into ``slices`` (rows, columns), this unit's corner at
    (``left``, ``top``)."""
    rows, columns = size[0] // side, size[1] // side
    cell_w, cell_h = width / slices[1] / columns, height / slices[0] / rows
    return kind(rows, columns, box_grid(rows, columns, cell_w, cell_h, left, top), label=label, fold=side)
