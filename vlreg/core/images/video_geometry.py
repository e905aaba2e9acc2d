"""Where each video token sits in the sequence, which frames it covers and where in them.

A family that reads videos declares its videos' grids (`vlreg_video_grids`): for each video,
one `VideoGrid` per run of tokens the processor writes (on the Qwen line, one per temporal
patch: 2 frames folded into each token), each a rows x columns raster of tokens with the
first and last frame of the video the user passed that the tokens cover, their box in those
frames' pixels, and the time the processor writes before them, where it writes one.
`video_geometry` runs the processor on a prompt, its images and its videos, asking for each
video's metadata so a family's grids can say which of the passed frames the processor kept
(`kept_frames`), finds the video tokens in the encoding (`Entry.token_mask`) and hands each
video its run of them.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import field, frozen

from ..errors import Unavailable
from .geometry import ImageGrid, _grids, source_of
from .options import check_options, given
from .processing import as_pil, configured


@frozen
class VideoGrid(ImageGrid):
    """An `ImageGrid` over frames ``frames[0]`` to ``frames[1]`` (indices into the video's
    frames as the user passed them, both included); ``seconds``: the time the processor
    writes in the prompt before these tokens (Qwen3-VL's ``<1.0 seconds>``), else ``None``."""

    frames: tuple[int, int] = (0, 0)
    seconds: float | None = None
    label: str = "frames"


@frozen
class VideoGeometry:
    """One video of a prompt, as the text model sees it: its batch ``row``, its tokens'
    ``positions`` there, its ``grids`` (`VideoGrid`, in sequence order), the frame size
    ``(width, height)`` the boxes are in, and ``offset``, where its rows start in
    ``vision.video_features``."""

    index: int
    row: int
    positions: torch.Tensor = field(eq=False)
    grids: tuple[VideoGrid, ...]
    size: tuple[int, int]
    offset: int
    source: Any = field(default=None, eq=False, repr=False)

    @property
    def tokens(self) -> int:
        return int(self.positions.numel())

    @property
    def boxes(self) -> torch.Tensor:
        """``[tokens, 4]``: each token's box in its frames, in the passed frames' pixels."""
        return torch.cat([grid.boxes for grid in self.grids])

    @property
    def frames(self) -> torch.Tensor:
        """``[tokens, 2]``: the first and last frame each token covers."""
        return torch.cat([torch.tensor([grid.frames]).expand(grid.tokens, 2) for grid in self.grids])

    @property
    def seconds(self) -> torch.Tensor | None:
        """``[tokens]``: the time the processor wrote before each token's frames, or ``None``
        where it writes none."""
        if any(grid.seconds is None for grid in self.grids):
            return None
        return torch.cat([torch.full((grid.tokens,), float(grid.seconds), dtype=torch.float64) for grid in self.grids])

    @property
    def features(self) -> slice:
        """This video's rows of ``vision.video_features``."""
        return slice(self.offset, self.offset + self.tokens)


def frame_size(frame: Any) -> tuple[int, int]:
    """A frame's ``(width, height)``: a PIL image's, or an array's ``[H, W, C]`` or ``[C, H, W]``."""
    if hasattr(frame, "width"):
        return frame.width, frame.height
    shape = tuple(frame.shape)
    return (shape[1], shape[0]) if shape[-1] in (1, 3, 4) else (shape[2], shape[1])


def frame_grids(video: Sequence[Any], rows: int, columns: int, fold: int | None = 1, newline: bool = False) -> list:
    """A video whose every frame is resized whole and becomes ``rows`` x ``columns`` tokens of
    its own, frame by frame (LLaVA-OneVision's, Perception LM's): a `VideoGrid` a frame, and,
    with ``newline``, one token over no pixels after the last frame (LLaVA-OneVision's)."""
    frames = list(video)
    width, height = frame_size(frames[0])
    from .geometry import box_grid

    boxes = box_grid(rows, columns, width / columns, height / rows)
    grids = [VideoGrid(rows, columns, boxes, fold=fold, frames=(k, k)) for k in range(len(frames))]
    if newline:
        grids.append(VideoGrid(1, 1, torch.full((1, 4), float("nan")), frames=(0, len(frames) - 1), label="newline"))
    return grids


def kept_frames(encoding: Any, index: int, video: Sequence[Any]) -> list[int]:
    """The frames of video ``index`` the processor kept, as indices into ``video`` as passed, in
    order: its ``video_metadata``'s ``frames_indices`` where it sampled them (`video_geometry`
    asks for the metadata), else every frame."""
    metadata = (encoding.get("video_metadata") or [None] * (index + 1))[index]
    indices = getattr(metadata, "frames_indices", None)
    return list(range(len(video))) if indices is None else [int(k) for k in indices]


def video_geometry(model: Any, prompt: Any, images: Any, videos: Sequence[Any], **options: Any) -> list:
    """Each image's `ImageGeometry` (in the order given), then each video's `VideoGeometry`.
    Runs the processor only, as the trace does, with ``images`` and ``videos`` together."""
    vision = model.vision
    reason = vision.no_images() or vision.no_videos() or vision.why_unavailable("video_features")
    if reason:
        raise Unavailable(f"vision.geometry(videos=...) is unavailable: {reason}")
    declare = model.family.video_grids
    if declare is None:
        raise Unavailable(
            f"vision.geometry(videos=...) is unavailable: the {model.family.name!r} family declares no video grids "
            "(its plugin implements no vlreg_video_grids); its videos' features are served, at "
            "vision.video_token_mask"
        )
    check_options(model.processor, options, "vision.geometry")
    options = {**given(model), **options}
    processor = configured(model.processor, options)
    videos = list(videos)
    media = {"images": list(images)} if images else {}  # a processor may take no empty list of images
    several = isinstance(prompt, (list, tuple))
    encoding = processor(text=list(prompt) if several else prompt, **media, videos=videos,
                         **{**options, "return_metadata": True}, **({"padding": True} if several else {}),
                         return_tensors="pt")
    pictures = [as_pil(image) for image in images or []]
    found = model.family.entry.place(model, encoding, [_grids(grids) for grids in model.family.image_grids(
        encoding, pictures, processor)], pictures) if pictures else []  # the images', in the same encoding
    declared = [tuple(grids) for grids in declare(encoding, videos, processor)]
    if len(declared) != len(videos):
        raise ValueError(f"the family declared grids for {len(declared)} videos, but {len(videos)} were given")
    rows, positions = model.family.entry.token_mask(model, encoding, video=True).nonzero(as_tuple=True)
    counts = [sum(grid.tokens for grid in grids) for grids in declared]
    if sum(counts) != rows.numel():
        raise ValueError(
            f"the family's video grids give {counts} tokens per video ({sum(counts)} in all), but the processor "
            f"put {rows.numel()} video tokens in the prompt"
        )
    offset = 0
    for index, (grids, count, video) in enumerate(zip(declared, counts, videos)):
        row = rows[offset : offset + count]
        first = as_pil(video[0])  # a list of frames, or an array or tensor of them
        found.append(VideoGeometry(index=index, row=int(row[0]), positions=positions[offset : offset + count],
                                   grids=grids, size=tuple(first.size), offset=offset,
                                   source=source_of(encoding, int(row[0]))))
        offset += count
    return found
