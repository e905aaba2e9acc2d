"""Pictures of per-image-token scores, drawn on the image the user passed in (pillow only).

`overlay` paints each token's box of an `ImageGeometry` in the colour of its score,
blended over the original image, outlines the token grid where the boxes are and adds a
colour bar; the result has the original image's size, so it lines up with the picture.
`overlay_grid` lays out several overlays on one colour scale (a score across layers or
heads). Parts of the image no token covers (outside a centre crop) are dimmed.
`feature_map` draws one dictionary feature's activations (`vlreg.dictionaries`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from .core.geometry import ImageGeometry

#: A dark-to-bright ramp (blue-purple, red, orange, pale yellow) that stays readable
#: over a photo at any blend.
RAMP = ((12, 7, 60), (88, 20, 120), (176, 40, 100), (236, 98, 48), (250, 176, 40), (252, 254, 164))


def colours(values: torch.Tensor) -> torch.Tensor:
    """``values`` in [0, 1] as RGB ``[..., 3]`` floats in [0, 255] along `RAMP`."""
    ramp = torch.tensor(RAMP, dtype=torch.float32)
    where = values.clamp(0, 1).float() * (len(RAMP) - 1)
    low = where.floor().long().clamp(max=len(RAMP) - 2)
    part = (where - low)[..., None]
    return ramp[low] * (1 - part) + ramp[low + 1] * part


def _grid_scores(geometry: ImageGeometry, scores: Any, grid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The chosen grid's boxes and the scores of its tokens, from a score per image token
    or per token of that grid."""
    scores = torch.as_tensor(scores, dtype=torch.float32).detach().reshape(-1)
    chosen = geometry.grids[grid]
    if scores.numel() == geometry.tokens:
        scores = scores[geometry.span(grid)]
    elif scores.numel() != chosen.tokens:
        raise ValueError(
            f"{scores.numel()} scores for an image of {geometry.tokens} tokens whose grid {grid} has {chosen.tokens}"
        )
    return chosen.boxes, scores


def _pixels(box: torch.Tensor) -> tuple[int, int, int, int]:
    """A box's pixel edges, rounded the same way on both sides of a shared edge."""
    return tuple(int(math.floor(float(v) + 0.5)) for v in box)


def _font(size: int) -> Any:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # a pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _label(draw: ImageDraw.ImageDraw, xy: tuple[int, int], text: str, size: int, anchor: str = "la") -> None:
    font = _font(size)
    box = draw.textbbox(xy, text, font=font, anchor=anchor)
    draw.rectangle((box[0] - 2, box[1] - 2, box[2] + 2, box[3] + 2), fill=(0, 0, 0, 170))
    draw.text(xy, text, font=font, fill=(255, 255, 255, 255), anchor=anchor)


def _colour_bar(canvas: Image.Image, low: float, high: float) -> None:
    width, height = canvas.size
    bar_w, margin = max(5, width // 40), max(3, width // 80)
    top, bottom = int(height * 0.2), int(height * 0.8)
    x0 = width - margin - bar_w
    ramp = colours(torch.linspace(1, 0, max(bottom - top, 1)))
    strip = Image.fromarray(ramp.round().to(torch.uint8)[:, None].expand(-1, bar_w, -1).contiguous().numpy())
    canvas.paste(strip, (x0, top))
    draw = ImageDraw.Draw(canvas, "RGBA")
    draw.rectangle((x0 - 1, top - 1, x0 + bar_w, bottom), outline=(255, 255, 255, 220))
    size = max(8, height // 22)
    _label(draw, (x0 - 3, top), f"{high:.3g}", size, anchor="ra")
    _label(draw, (x0 - 3, bottom), f"{low:.3g}", size, anchor="rd")


def overlay(
    image: Image.Image,
    geometry: ImageGeometry,
    scores: Any,
    *,
    grid: int = -1,
    alpha: float = 0.55,
    low: float | None = None,
    high: float | None = None,
    lines: bool = True,
    bar: bool = True,
    title: str | None = None,
    zoom: int = 1,
) -> Image.Image:
    """``image`` (the original, as passed to the processor) with ``scores`` painted over
    the boxes of ``geometry.grids[grid]``, at the image's size times ``zoom`` (a small
    image enlarged pixel for pixel, so its labels stay readable).

    ``scores`` holds one value per image token or per token of that grid (NeXT's base and
    tile tokens cover the same pixels, so one grid is drawn: the tiles by default); tokens
    with no box or a NaN score are not painted. ``low`` and ``high`` fix the colour scale
    (default: the scores' range), so several overlays can share it."""
    if tuple(image.size) != tuple(geometry.size):
        raise ValueError(f"the image is {image.size}, but the geometry is of a {geometry.size} image")
    boxes, scores = _grid_scores(geometry, scores, grid)
    every = geometry.boxes * zoom
    boxes = boxes * zoom
    if zoom != 1:
        image = image.resize((image.width * zoom, image.height * zoom), Image.Resampling.NEAREST)
    shown = (~boxes.isnan().any(-1)) & ~scores.isnan()
    finite = scores[shown]
    if low is None:
        low = float(finite.min()) if finite.numel() else 0.0
    if high is None:
        high = float(finite.max()) if finite.numel() else 1.0
    scaled = (scores - low) / (high - low) if high > low else torch.full_like(scores, 0.5)
    paint = colours(scaled)

    base = torch.from_numpy(np.asarray(image.convert("RGB")).copy()).float()
    heat = torch.zeros_like(base)
    weight = torch.zeros(base.shape[:2])
    covered = torch.zeros(base.shape[:2], dtype=torch.bool)
    for box in every[~every.isnan().any(-1)]:
        x0, y0, x1, y1 = _pixels(box)
        covered[y0:y1, x0:x1] = True
    for box, colour, show in zip(boxes, paint, shown):
        if show:
            x0, y0, x1, y1 = _pixels(box)
            heat[y0:y1, x0:x1] = colour
            weight[y0:y1, x0:x1] = alpha
    weight = weight[..., None]
    blended = base * (1 - weight) + heat * weight
    blended[~covered] *= 0.45
    canvas = Image.fromarray(blended.round().clamp(0, 255).to(torch.uint8).numpy()).convert("RGBA")

    draw = ImageDraw.Draw(canvas, "RGBA")
    if lines:
        for box in boxes[~boxes.isnan().any(-1)]:
            x0, y0, x1, y1 = _pixels(box)
            if x1 - x0 >= 4 and y1 - y0 >= 4:
                draw.rectangle((x0, y0, x1, y1), outline=(255, 255, 255, 90))
    if title:
        _label(draw, (3, 3), title, max(8, canvas.height // 18))
    if bar:
        _colour_bar(canvas, low, high)
    return canvas.convert("RGB")


def overlay_grid(
    image: Image.Image,
    geometry: ImageGeometry,
    scores: "torch.Tensor | Sequence[Any]",
    *,
    titles: Sequence[str] | None = None,
    columns: int = 4,
    scale: float = 1.0,
    gap: int = 4,
    **options: Any,
) -> Image.Image:
    """One overlay per row of ``scores`` (``[panels, tokens]``: a score across layers,
    heads, ...), on one colour scale, ``columns`` to a row, each at ``scale`` times the
    image's size (times ``zoom``); ``titles`` name the panels (``"layer 3"``)."""
    rows = [torch.as_tensor(row, dtype=torch.float32).detach() for row in scores]
    values = torch.cat([row.reshape(-1) for row in rows])
    values = values[~values.isnan()]
    options.setdefault("low", float(values.min()) if values.numel() else 0.0)
    options.setdefault("high", float(values.max()) if values.numel() else 1.0)
    panels = [
        overlay(image, geometry, row, title=titles[i] if titles else None, **options) for i, row in enumerate(rows)
    ]
    zoom = options.get("zoom", 1)
    width, height = max(1, round(image.width * zoom * scale)), max(1, round(image.height * zoom * scale))
    across = min(columns, len(panels))
    down = math.ceil(len(panels) / across)
    sheet = Image.new("RGB", (across * width + (across - 1) * gap, down * height + (down - 1) * gap), (255, 255, 255))
    for i, panel in enumerate(panels):
        if scale != 1.0:
            panel = panel.resize((width, height), Image.Resampling.LANCZOS)
        sheet.paste(panel, ((i % across) * (width + gap), (i // across) * (height + gap)))
    return sheet


def feature_map(image: Image.Image, maps: Any, feature: int, *, index: int = 0, title: str | None = None,
                **options: Any) -> Image.Image:
    """A dictionary feature's activation over image ``index`` of ``maps`` (a
    `vlreg.dictionaries.FeatureMaps`), drawn with `overlay` on a scale from 0 (the
    feature off) to its largest activation there, titled with the feature's id."""
    options.setdefault("low", 0.0)
    return overlay(image, maps.geometry[index], maps.map(feature, index),
                   title=f"feature {feature}" if title is None else title, **options)
