"""Pictures of a score over a video, as a strip of the frames the user passed (pillow only).

`strip` draws a score per video token (`TokenScores.scores`, a logit lens's row, ...): one
panel per frame, each painted as `vlreg.pictures.overlay` paints an image, with the scores
of the tokens that cover that frame over their boxes (a token folding two frames, as on the
Qwen line, is painted on both), on one colour scale with one bar. `frame_strip` draws a
score per grid of the video's tokens (`FrameScores.scores`: a temporal patch, or a frame):
the frames in their own colours, each above a bar of its grid's score on one scale, the
colour bar beside them doubling as the bars' axis. Under each panel: the frame's index, and
the time the processor writes for its tokens where it writes one (Qwen3-VL, GLM). A frame
no token covers (the processor sampled it out) is dimmed and has no score.

The scores are checked against the geometry, and the video against the geometry's frames,
before anything is drawn. ``picture.info["panels"]`` is each frame's box in the picture,
``info["frames"]`` the frame each panel shows.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw

from .core.images.video_geometry import VideoGeometry
from .pictures import _band, _bar, _frame, _range, _size, colours, number, paint_boxes

#: The bars' band under each frame of a `frame_strip`, as a share of the frame's height.
CHART = 0.6


def _picture(frame: Any) -> Image.Image:
    """A frame as an RGB PIL image: a PIL image, or an array ``[H, W, C]`` (or a tensor
    ``[C, H, W]``) of uint8 values, or of floats in [0, 1]."""
    if isinstance(frame, Image.Image):
        return frame.convert("RGB")
    pixels = frame.detach().cpu().numpy() if isinstance(frame, torch.Tensor) else np.asarray(frame)
    if pixels.ndim == 3 and pixels.shape[-1] not in (1, 3, 4):
        pixels = np.moveaxis(pixels, 0, -1)
    if pixels.ndim == 3 and pixels.shape[-1] == 1:
        pixels = pixels[..., 0]
    if pixels.dtype != np.uint8:
        pixels = pixels.astype(np.float64) * (255 if pixels.max() <= 1 else 1)
        pixels = pixels.round().clip(0, 255).astype(np.uint8)
    return Image.fromarray(np.ascontiguousarray(pixels)).convert("RGB")


def _checked(video: Any, geometry: VideoGeometry, frames: Sequence[int] | None) -> tuple[list, list[int]]:
    """The video's frames as pictures and the indices of those drawn, once they are known to
    be the frames the geometry was made from."""
    if not isinstance(geometry, VideoGeometry):
        raise TypeError(f"a strip is drawn from a video's VideoGeometry (vision.geometry(prompt, videos=[...]) or a "
                        f"video helper's .geometry), not a {type(geometry).__name__}")
    pictures = [_picture(frame) for frame in video]
    last = int(geometry.frames.max()) if geometry.tokens else -1
    if last >= len(pictures):
        raise ValueError(f"the geometry's tokens cover frames up to {last}, but the video has {len(pictures)} frames: "
                         "pass the video the geometry was made from")
    sizes = {picture.size for picture in pictures}
    if sizes != {tuple(geometry.size)}:
        raise ValueError(f"the video's frames are {sorted(sizes)}, but the geometry is of {tuple(geometry.size)} frames: "
                         "pass the video the geometry was made from")
    shown = list(range(len(pictures))) if frames is None else [int(k) for k in frames]
    if not shown or any(not 0 <= k < len(pictures) for k in shown):
        raise ValueError(f"frames={frames}: the video has frames 0 to {len(pictures) - 1}")
    return pictures, shown


def _scores(scores: Any, count: int, what: str, hint: str) -> torch.Tensor:
    values = torch.as_tensor(scores, dtype=torch.float32).detach().cpu()
    if values.dim() != 1 or values.numel() != count:
        raise ValueError(f"{tuple(values.shape)} scores for a video of {count} {what}: pass one score per {what[:-1]}, "
                         f"in sequence order{hint}")
    return values


def frame_labels(geometry: VideoGeometry, frames: Sequence[int]) -> list[str]:
    """``"frame 3"`` for each frame, with ``" · 0.5 s"`` where the processor writes a time
    for the tokens covering it (the time of their temporal patch)."""
    labels = []
    for k in frames:
        times = [grid.seconds for grid in geometry.grids if grid.frames[0] <= k <= grid.frames[1]
                 and grid.seconds is not None]
        labels.append(f"frame {k}" + (f" · {number(times[0])} s" if times else ""))
    return labels


def _sheet(panels: list, under: list, *, columns: int, gap: int) -> tuple[Image.Image, list, list]:
    """The panels ``columns`` to a row, each with its ``under`` (a picture, or None) below
    it: the sheet, each panel's box and each under part's box in it."""
    width, height = panels[0].size
    below = max((part.height for part in under if part is not None), default=0)
    across = min(columns, len(panels))
    down = math.ceil(len(panels) / across)
    body = Image.new("RGB", (across * width + (across - 1) * gap, down * (height + below) + (down - 1) * gap), (255,) * 3)
    boxes, parts = [], []
    for i, (panel, part) in enumerate(zip(panels, under)):
        x, y = (i % across) * (width + gap), (i // across) * (height + below + gap)
        body.paste(panel, (x, y))
        if part is not None:
            body.paste(part, (x, y + height))
        boxes.append((x, y, x + width, y + height))
        parts.append((x, y + height, x + width, y + height + below))
    return body, boxes, parts


def _framed(body, boxes, shown, *, bar, title, caption, size) -> Image.Image:
    picture = _frame(body, boxes, title=title, bar=bar, caption=caption, size=size)
    picture.info["frames"] = shown
    return picture


def strip(
    video: Any,
    geometry: VideoGeometry,
    scores: Any,
    *,
    frames: Sequence[int] | None = None,
    columns: int = 8,
    scale: float = 1.0,
    zoom: int = 1,
    gap: int = 6,
    alpha: float = 0.55,
    low: float | None = None,
    high: float | None = None,
    lines: bool = True,
    grey: bool = True,
    bar: bool = True,
    label: str = "score",
    labels: Sequence[str] | None = None,
    title: str | None = None,
    caption: str | None = None,
) -> Image.Image:
    """``video`` (the frames as passed to the processor: a list of PIL frames, an array
    ``[frames, H, W, 3]`` or a tensor) as a strip of ``frames`` (default: all), ``columns``
    to a row, each frame at ``scale`` times its size (times ``zoom``) with ``scores`` (one
    per video token of ``geometry``, in sequence order) painted over the boxes of the tokens
    that cover it, on one colour scale (``low`` to ``high``, default the scores' range over
    the tokens that have a box) with one colour bar (``label``), ``labels`` under the frames
    (default `frame_labels`), ``title`` above and ``caption`` below. ``alpha``, ``lines``
    and ``grey`` are `vlreg.pictures.overlay`'s."""
    pictures, shown = _checked(video, geometry, frames)
    values = _scores(scores, geometry.tokens, "tokens", " (geometry.tokens; a score per grid is frame_strip's)")
    boxes, spans = geometry.boxes, geometry.frames
    low, high = _range(values[~boxes.isnan().any(-1)], low, high)
    width, height = max(1, round(geometry.size[0] * zoom * scale)), max(1, round(geometry.size[1] * zoom * scale))
    size = _size(width * 2)
    panels = []
    for k in shown:
        covering = (spans[:, 0] <= k) & (k <= spans[:, 1])
        panel = paint_boxes(pictures[k], boxes[covering], boxes[covering], values[covering], alpha=alpha, low=low,
                            high=high, lines=lines, zoom=zoom, grey=grey)
        panels.append(panel if panel.size == (width, height) else panel.resize((width, height), Image.Resampling.LANCZOS))
    texts = frame_labels(geometry, shown) if labels is None else list(labels)
    under = [_band(text, width, max(10, round(size * 0.8))) for text in _each(texts, shown)]
    body, where, _ = _sheet(panels, under, columns=columns, gap=gap)
    key = _bar(height, low, high, label, size) if bar else None
    return _framed(body, where, shown, bar=key, title=title, caption=caption, size=size)


def _each(texts: list, shown: list) -> list:
    if len(texts) != len(shown):
        raise ValueError(f"{len(texts)} labels for {len(shown)} frames drawn: pass one label a frame")
    return texts


def frame_strip(
    video: Any,
    geometry: VideoGeometry,
    scores: Any,
    *,
    frames: Sequence[int] | None = None,
    columns: int = 8,
    scale: float = 1.0,
    zoom: int = 1,
    gap: int = 6,
    low: float | None = None,
    high: float | None = None,
    bar: bool = True,
    label: str = "score",
    labels: Sequence[str] | None = None,
    title: str | None = None,
    caption: str | None = None,
) -> Image.Image:
    """``video`` as a strip of ``frames`` (default: all; options as `strip`'s), in their
    own colours, each above a bar of ``scores`` for the grid of tokens covering it (one per
    grid of ``geometry``, in sequence order: `FrameScores.scores`; the frames a grid folds
    show its one score), its value written under it. The bars stand on zero on one scale
    (``low`` to ``high``, default the scores' range widened to take in 0), in the colour of
    their value, with the colour bar beside the first row as their axis. A grid over no
    pixels (LLaVA-OneVision's newline) is not drawn."""
    pictures, shown = _checked(video, geometry, frames)
    values = _scores(scores, len(geometry.grids), "grids",
                     "; for scores [layers, grids] (attention_to_frames) draw one row, e.g. scores[-1]")
    seen = [not grid.boxes.isnan().all() for grid in geometry.grids]
    low, high = _range(values[torch.tensor(seen)], low, high)
    low, high = min(low, 0.0), max(high, 0.0)
    width, height = max(1, round(geometry.size[0] * zoom * scale)), max(1, round(geometry.size[1] * zoom * scale))
    size = _size(width * 2)
    chart = max(size * 2, round(height * CHART))
    texts = _each(frame_labels(geometry, shown) if labels is None else list(labels), shown)
    panels, under = [], []
    for k, text in zip(shown, texts):
        panel = pictures[k].resize((width, height), Image.Resampling.LANCZOS if zoom * scale < 1 else Image.Resampling.NEAREST)
        panels.append(panel)
        covering = [g for g, grid in enumerate(geometry.grids) if seen[g] and grid.frames[0] <= k <= grid.frames[1]]
        value = float(values[covering[0]]) if covering else math.nan
        under.append(_column(value, low, high, width, chart, text, size))
    body, where, _ = _sheet(panels, under, columns=columns, gap=gap)
    key = None
    if bar:
        axis = _bar(chart, low, high, label, size)
        key = Image.new("RGB", (axis.width, body.height), (255,) * 3)
        key.paste(axis, (0, height))  # beside the first row's bars, their tops and bottoms at its ends
    return _framed(body, where, shown, bar=key, title=title, caption=caption, size=size)


def _column(value: float, low: float, high: float, width: int, chart: int, text: str, size: int) -> Image.Image:
    """A frame's part below it: its bar in a band ``chart`` tall (``high`` at the top,
    ``low`` at the bottom, a line at zero), the value, then ``text``."""
    scaled = lambda v: (chart - 1) * (high - v) / (high - low) if high > low else chart / 2  # noqa: E731
    band = Image.new("RGB", (width, chart), (255,) * 3)
    draw = ImageDraw.Draw(band)
    zero = round(scaled(0.0))
    if not math.isnan(value):
        top, bottom = sorted((zero, round(scaled(value))))
        share = (value - low) / (high - low) if high > low else 0.5
        colour = tuple(int(c) for c in colours(torch.tensor(share)).round().tolist())
        draw.rectangle((width // 6, top, width - 1 - width // 6, max(top, bottom)), fill=colour)
    draw.line((0, zero, width - 1, zero), fill=(95, 95, 95))
    words = _band(f"{number(value) if not math.isnan(value) else '—'}\n{text}", width, max(10, round(size * 0.8)))
    part = Image.new("RGB", (width, chart + words.height), (255,) * 3)
    part.paste(band, (0, 0))
    part.paste(words, (0, chart))
    return part
