"""Pictures of per-image-token scores, drawn on the image the user passed in (pillow only).

`overlay` paints each token's box of an `ImageGeometry` in the colour of its score,
blended over a grey copy of the original image (the scene's own colours would tint the
score's: a purple shape under a red score reads pink), outlines the token grid where the boxes are, outlines
the tokens in ``mark`` (a query token), and frames the result: a title above, a colour
bar labelled with what the score is to the right, a caption (`caption`: the model and
the prompt) below, all outside the image, so none of them hides a pixel of it. Parts of
the image no token covers (outside a centre crop) are dimmed. `overlay_grid` lays out
several panels on one colour scale (a score across layers or heads) with one bar.
`feature_map` draws one dictionary feature's activations (`vlreg.dictionaries`).
Every number drawn is formatted by `number`. The pictures are PIL images, which show
themselves in a notebook (``_repr_png_``); ``picture.info["origin"]`` is where the
image's top-left pixel is in a framed picture, ``info["panels"]`` each panel's box in a
grid.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from .core.images.geometry import ImageGeometry

#: A dark-to-bright ramp (blue-purple, red, orange, pale yellow) that stays readable
#: over a photo at any blend.
RAMP = ((12, 7, 60), (88, 20, 120), (176, 40, 100), (236, 98, 48), (250, 176, 40), (252, 254, 164))
#: The outline of a marked token: a colour the ramp never takes.
MARK = (0, 225, 255)
PAPER, INK, GREY = (255, 255, 255), (20, 20, 20), (95, 95, 95)


def number(value: float) -> str:
    """The one number format of vlreg's pictures and plots: three significant digits."""
    text = f"{float(value):.3g}"
    return "0" if text == "-0" else text


def colours(values: torch.Tensor) -> torch.Tensor:
    """``values`` in [0, 1] as RGB ``[..., 3]`` floats in [0, 255] along `RAMP`."""
    ramp = torch.tensor(RAMP, dtype=torch.float32)
    where = values.clamp(0, 1).float() * (len(RAMP) - 1)
    low = where.floor().long().clamp(max=len(RAMP) - 2)
    part = (where - low)[..., None]
    return ramp[low] * (1 - part) + ramp[low + 1] * part


def caption(model: Any, prompt: str) -> str:
    """``"<model> (<model_type>) · <prompt>"``: the checkpoint's folder name or hub id, and
    the prompt without the tokenizer's special tokens (the chat template's markers)."""
    name = str(getattr(model, "repo_id", None) or model.config._name_or_path)
    if Path(name).is_dir():
        name = Path(name).resolve().name
    special = getattr(model.tokenizer, "all_special_tokens", [])
    text = re.sub("|".join(map(re.escape, special)), " ", prompt) if special else prompt
    return f"{name} ({model.config.model_type}) · {' '.join(text.split())}"


def _grid_scores(geometry: ImageGeometry, scores: Any, grid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The chosen grid's boxes and the scores of its tokens, from a score per image token
    or per token of that grid."""
    scores = torch.as_tensor(scores, dtype=torch.float32).detach().reshape(-1)
    chosen = geometry.grids[grid]
    if chosen.resampled:
        raise ValueError(
            f"grid {grid} ({chosen.label}) is a resampler's {chosen.tokens} latents, each over its whole frame "
            f"(ImageGrid.resampled): a picture would paint one box once per latent and show only the last one's "
            f"score; read the scores per frame instead (scores[geometry.span(grid)])"
        )
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


def _range(values: torch.Tensor, low: float | None, high: float | None) -> tuple[float, float]:
    finite = values[~values.isnan()]
    low = (float(finite.min()) if finite.numel() else 0.0) if low is None else float(low)
    high = (float(finite.max()) if finite.numel() else 1.0) if high is None else float(high)
    return low, high


def _paint(image, geometry, scores, *, grid, alpha, low, high, lines, zoom, mark, grey=True) -> Image.Image:
    """The image times ``zoom`` (a grey copy, with ``grey``) with the scores painted over
    their boxes: no frame."""
    if tuple(image.size) != tuple(geometry.size):
        raise ValueError(f"the image is {image.size}, but the geometry is of a {geometry.size} image")
    boxes, scores = _grid_scores(geometry, scores, grid)
    marked = [] if mark is None else [mark] if isinstance(mark, int) else list(mark)
    if any(not 0 <= token < len(boxes) for token in marked):
        raise ValueError(f"mark={mark}: the grid drawn has tokens 0 to {len(boxes) - 1}")
    return paint_boxes(image, geometry.boxes, boxes, scores, alpha=alpha, low=low, high=high, lines=lines, zoom=zoom,
                       marked=marked, grey=grey)


def paint_boxes(image, every, boxes, scores, *, alpha, low, high, lines, zoom, marked=(), grey=True) -> Image.Image:
    """The image times ``zoom`` (a grey copy, with ``grey``) with ``scores`` painted over
    ``boxes`` (``[n, 4]``, in the image's pixels), the pixels outside ``every`` box dimmed
    (no token sees them), the tokens ``marked`` outlined: no frame. Boxes with a NaN edge or
    score are not painted; where boxes overlap, the later one's score shows."""
    every, boxes = every * zoom, boxes * zoom
    if zoom != 1:
        image = image.resize((image.width * zoom, image.height * zoom), Image.Resampling.NEAREST)
    shown = (~boxes.isnan().any(-1)) & ~scores.isnan()
    scaled = (scores - low) / (high - low) if high > low else torch.full_like(scores, 0.5)
    paint = colours(scaled)

    base = torch.from_numpy(np.asarray((image.convert("L") if grey else image).convert("RGB")).copy()).float()
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
    for token in marked:
        if not boxes[token].isnan().any():
            x0, y0, x1, y1 = _pixels(boxes[token])
            draw.rectangle((x0, y0, x1 - 1, y1 - 1), outline=MARK, width=max(2, zoom))
    return canvas.convert("RGB")


def _wrap(text: str, font: Any, width: int) -> list[str]:
    """``text`` in lines no wider than ``width`` (words kept whole; a line break kept)."""
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            longer = f"{line} {word}" if line else word
            if line and font.getlength(longer) > width:
                lines.append(line)
                line = word
            else:
                line = longer
        lines.append(line)
    return lines


def _band(text: str | None, width: int, size: int, fill=INK) -> Image.Image | None:
    """A white band holding ``text`` wrapped to ``width``, or None without text."""
    if not text:
        return None
    font = _font(size)
    lines = _wrap(text, font, width)
    step = round(size * 1.3)
    band = Image.new("RGB", (width, step * len(lines) + size // 3), PAPER)
    draw = ImageDraw.Draw(band)
    for i, line in enumerate(lines):
        draw.text((0, i * step), line, font=font, fill=fill)
    return band


def _bar(height: int, low: float, high: float, label: str, size: int) -> Image.Image:
    """A vertical colour bar ``height`` tall (``high`` at the top), its ends and middle
    numbered, ``label`` written along it."""
    font, side = _font(size), max(10, size)
    ticks = [(high, 0), ((low + high) / 2, height // 2), (low, height - 1)]
    numbers = max(font.getlength(number(value)) for value, _ in ticks)
    label_font = _font(size)
    label_lines = _wrap(label, label_font, height)
    step = round(size * 1.3)
    width = side + 5 + math.ceil(numbers) + size // 2 + step * len(label_lines)
    bar = Image.new("RGB", (width, height), PAPER)
    ramp = colours(torch.linspace(1, 0, height))
    strip = Image.fromarray(ramp.round().to(torch.uint8)[:, None].expand(-1, side, -1).contiguous().numpy())
    bar.paste(strip, (0, 0))
    draw = ImageDraw.Draw(bar)
    draw.rectangle((0, 0, side - 1, height - 1), outline=GREY)
    for value, y in ticks:
        draw.line((side, y, side + 3, y), fill=INK)
        anchor = "la" if y == 0 else "ld" if y == height - 1 else "lm"
        draw.text((side + 5, y), number(value), font=font, fill=INK, anchor=anchor)
    along = Image.new("RGB", (height, step * len(label_lines)), PAPER)
    pen = ImageDraw.Draw(along)
    for i, line in enumerate(label_lines):
        pen.text((height // 2, i * step + step // 2), line, font=label_font, fill=INK, anchor="mm")
    bar.paste(along.rotate(90, expand=True), (side + 5 + math.ceil(numbers) + size // 2, 0))
    return bar


def _frame(body: Image.Image, boxes: list, *, title, bar, caption, size) -> Image.Image:
    """``body`` (panels at ``boxes``) with ``title`` above, ``bar`` to its right and
    ``caption`` below, on white; the margins hold them, never the body."""
    margin = size // 2
    right = bar.width + size if bar is not None else 0
    width = body.width + right
    top = _band(title, width, round(size * 1.15))
    bottom = _band(caption, width, round(size * 0.85), fill=GREY)
    y = margin + (top.height if top else 0)
    sheet = Image.new("RGB", (width + 2 * margin, y + body.height + (bottom.height + margin if bottom else 0) + margin),
                      PAPER)
    if top:
        sheet.paste(top, (margin, margin))
    sheet.paste(body, (margin, y))
    if bar is not None:
        sheet.paste(bar, (margin + body.width + size, y))
    if bottom:
        sheet.paste(bottom, (margin, y + body.height + margin))
    sheet.info["origin"] = (margin, y)
    sheet.info["panels"] = [(x0 + margin, y0 + y, x1 + margin, y1 + y) for x0, y0, x1, y1 in boxes]
    return sheet


def _size(width: int) -> int:
    """The text size of a picture ``width`` wide."""
    return max(11, round(width / 32))


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
    label: str = "score",
    title: str | None = None,
    caption: str | None = None,
    mark: "int | Sequence[int] | None" = None,
    zoom: int = 1,
    grey: bool = True,
) -> Image.Image:
    """``image`` (the original, as passed to the processor) with ``scores`` painted over
    the boxes of ``geometry.grids[grid]``, on a grey copy of it (``grey=False``: over its
    colours, which then tint the scores'), at the image's size times ``zoom`` (a small
    image enlarged pixel for pixel), framed by ``title``, the colour bar (``bar``, its
    ``label`` saying what the score is and its unit) and ``caption``, all outside it;
    with none of the three, the painted image alone.

    ``scores`` holds one value per image token or per token of that grid (NeXT's base and
    tile tokens cover the same pixels, so one grid is drawn: the tiles by default); tokens
    with no box or a NaN score are not painted; a grid of resampled tokens (every one over
    its whole frame) is refused. ``low`` and ``high`` fix the colour scale
    (default: the scores' range), so several overlays can share it. ``mark`` outlines
    tokens of the grid drawn in `MARK` (a query token)."""
    values = _grid_scores(geometry, scores, grid)[1]
    low, high = _range(values, low, high)
    body = _paint(image, geometry, scores, grid=grid, alpha=alpha, low=low, high=high, lines=lines, zoom=zoom, mark=mark,
                  grey=grey)
    if not (title or caption or bar):
        body.info["origin"] = (0, 0)
        return body
    size = _size(body.width)
    strip = _bar(body.height, low, high, label, size) if bar else None
    return _frame(body, [(0, 0, body.width, body.height)], title=title, bar=strip, caption=caption, size=size)


def overlay_grid(
    image: Image.Image,
    geometry: ImageGeometry,
    scores: "torch.Tensor | Sequence[Any]",
    *,
    titles: Sequence[str] | None = None,
    columns: int = 4,
    scale: float = 1.0,
    gap: int = 6,
    bar: bool = True,
    label: str = "score",
    title: str | None = None,
    caption: str | None = None,
    zoom: int = 1,
    low: float | None = None,
    high: float | None = None,
    **options: Any,
) -> Image.Image:
    """One panel per row of ``scores`` (``[panels, tokens]``: a score across layers,
    heads, ...), on one colour scale, ``columns`` to a row, each at ``scale`` times the
    image's size (times ``zoom``), ``titles`` above each panel (``"layer 3"``), one colour
    bar for all (``label``), ``title`` above and ``caption`` below the sheet. Other
    options (``grid``, ``alpha``, ``lines``, ``mark``, ``grey``) are `overlay`'s, for every panel."""
    unknown = set(options) - {"grid", "alpha", "lines", "mark", "grey"}
    if unknown:
        raise TypeError(f"overlay_grid got unexpected options {sorted(unknown)}: it takes grid, alpha, lines, mark and grey")
    rows = [torch.as_tensor(row, dtype=torch.float32).detach() for row in scores]
    low, high = _range(torch.cat([row.reshape(-1) for row in rows]), low, high)
    width, height = max(1, round(image.width * zoom * scale)), max(1, round(image.height * zoom * scale))
    size = _size(width * 2)
    heads = [_band(titles[i] if titles else None, width, max(10, round(size * 0.8))) for i in range(len(rows))]
    head = max((band.height for band in heads if band is not None), default=0)
    across = min(columns, len(rows))
    down = math.ceil(len(rows) / across)
    body = Image.new("RGB", (across * width + (across - 1) * gap, down * (head + height) + (down - 1) * gap), PAPER)
    boxes = []
    for i, row in enumerate(rows):
        panel = _paint(image, geometry, row, low=low, high=high, zoom=zoom, grid=options.get("grid", -1),
                       alpha=options.get("alpha", 0.55), lines=options.get("lines", True), mark=options.get("mark"),
                       grey=options.get("grey", True))
        if panel.size != (width, height):
            panel = panel.resize((width, height), Image.Resampling.LANCZOS)
        x, y = (i % across) * (width + gap), (i // across) * (head + height + gap)
        if heads[i] is not None:
            body.paste(heads[i], (x, y))
        body.paste(panel, (x, y + head))
        boxes.append((x, y + head, x + width, y + head + height))
    strip = _bar(body.height - head, low, high, label, size) if bar else None
    if strip is not None:  # the bar spans the panels, below the first row's titles
        column = Image.new("RGB", (strip.width, body.height), PAPER)
        column.paste(strip, (0, head))
        strip = column
    return _frame(body, boxes, title=title, bar=strip, caption=caption, size=size)


def feature_map(image: Image.Image, maps: Any, feature: int, *, index: int = 0, title: str | None = None,
                **options: Any) -> Image.Image:
    """A dictionary feature's activation over image ``index`` of ``maps`` (a
    `vlreg.dictionaries.FeatureMaps`), drawn with `overlay` on a scale from 0 (the
    feature off) to its largest activation there, titled with the feature's id."""
    options.setdefault("low", 0.0)
    options.setdefault("label", f"feature {feature}'s activation")
    return overlay(image, maps.geometry[index], maps.map(feature, index),
                   title=f"feature {feature}" if title is None else title, **options)
