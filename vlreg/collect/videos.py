"""Video files as `collect` reads them: decoded with PyAV (FFmpeg), an optional extra.

A video file becomes a `Clip`: the frames chosen (every frame, or ``frames`` of them
evenly spaced over the file) as RGB PIL images, and each one's number in the file, so a
store's ``frame`` column names the file's own frames whatever was chosen. Only the chosen
frames are kept in memory. The video processor is then told to keep every frame it is
given (``do_sample_frames=False`` where it samples by rate), so the frames a row covers are
the ones the geometry places it in. PyAV is imported only when a video is met, and its
absence is refused before any model runs (`decoder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import frozen

#: File extensions read as videos (a GIF stays an image, as PIL reads it).
VIDEO_EXTENSIONS = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ogv", ".flv", ".wmv"})


def is_video(path: "str | Path") -> bool:
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS


def missing_decoder(name: str) -> str:
    """What to do when a video is met and PyAV is not installed, in vlreg's words."""
    return (f"{name} is a video file, and reading videos needs the video extra (PyAV, FFmpeg's decoder): "
            f"pip install 'vlreg[video]' (or pip install av), or leave the video files out of the input")


def decoder(name: str) -> Any:
    """The ``av`` module, or an ImportError saying which extra to install."""
    try:
        import av
    except ImportError:
        raise ImportError(missing_decoder(name)) from None
    return av


@frozen(eq=False)
class Clip:
    """A decoded video: ``frames`` (RGB PIL images, in order) and ``numbers``, each frame's
    index among the file's decoded frames."""

    frames: list
    numbers: list[int]

    @property
    def size(self) -> tuple[int, int]:
        return self.frames[0].size


def probe(path: Path, name: str) -> tuple[int, int]:
    """The video's frame size ``(width, height)`` from its header (nothing is decoded);
    raises where the file has no video stream or does not open."""
    av = decoder(name)
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise ValueError("the file holds no video stream")
        context = container.streams.video[0].codec_context
        return int(context.width), int(context.height)


def chosen(total: int, frames: int | None) -> list[int]:
    """The frame numbers kept of ``total``: all, or ``frames`` evenly spaced from the first
    to the last (all of them where the file has no more)."""
    if frames is None or frames >= total:
        return list(range(total))
    if frames == 1:
        return [0]
    return sorted({round(k * (total - 1) / (frames - 1)) for k in range(frames)})


def decode(path: Path, name: str, frames: int | None = None) -> Clip:
    """The file's frames ``chosen`` keeps, as RGB PIL images. Where the header does not
    count the frames (some containers), a first pass counts the stream's packets."""
    av = decoder(name)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        total = stream.frames
        if frames is not None and not total:
            total = sum(1 for packet in container.demux(stream) if packet.size)
            container.seek(0)
        keep = set(chosen(total, frames)) if frames is not None else None
        kept, numbers = [], []
        for number, frame in enumerate(container.decode(stream)):
            if keep is None or number in keep:
                kept.append(frame.to_image())
                numbers.append(number)
    if not kept:
        raise ValueError("no frame could be decoded")
    return Clip(kept, numbers)


def check_frames(frames: Any) -> None:
    if frames is not None and (not isinstance(frames, int) or isinstance(frames, bool) or frames < 1):
        raise ValueError(f"frames={frames!r}: the number of frames to read from each video, evenly spaced over it "
                         f"(a positive integer), or None for every frame")


def video_placeholder(model: Any) -> str | None:
    """The processor's video placeholder as a prompt holds it, or ``None``."""
    processor = model.processor
    token = getattr(processor, "video_placeholder_token", None) or getattr(processor, "video_token", None)
    token = getattr(token, "content", token)
    return token if isinstance(token, str) and token else None


def keep_every_frame(model: Any) -> dict:
    """The processor options a video's trace and geometry take so that the processor keeps
    every frame it is given (it would otherwise sample them by rate, from timings a list
    of frames does not carry)."""
    video = getattr(model.processor, "video_processor", None)
    return {"do_sample_frames": False} if getattr(video, "do_sample_frames", False) else {}


def no_videos(model: Any) -> str | None:
    """Why this model reads no video (then a video file is refused, or skipped), or ``None``."""
    vision = model.__dict__.get("vision")
    if vision is None:
        return "this model has no vision part"
    return vision.no_images() or vision.no_videos() or vision.why_unavailable("video_features")
