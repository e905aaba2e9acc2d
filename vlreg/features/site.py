"""The feature browser's pages: static HTML, CSS and a few lines of JavaScript, offline.

Everything a page shows is in the folder: the images (re-encoded as PNG, the long side at
most `SIDE` pixels; every box stays in the original image's pixels, which each SVG's
coordinates are), the style sheet and the search script; no page names anything outside
it. A crop is an SVG whose view is the token's box widened by `MARGIN` boxes, over the
whole image, with the box drawn (``rect.box``); the overlay paints each token's box in
vlreg's colour ramp (`vlreg.pictures.colours`). Each element carries what it shows as
``data-`` attributes (the row, image, token, box, activation), which the browser test
reads back against the store's index; ``data.json`` holds the same for scripts.
"""

from __future__ import annotations

import html
import json
import math
import shutil
from pathlib import Path
from typing import Any

import torch

from ..pictures import colours, number
from .scan import Found, Reader

SIDE = 768  # an image's long side in the site, at most
MARGIN = 1.0  # a crop shows this many boxes' widths around the token's box
ASSETS = Path(__file__).resolve().parent / "assets"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _box_text(box: Any) -> str:
    return " ".join(number(v) for v in box)


def write_images(out: Path, store: Any, needed: set[int], load: dict) -> dict[int, tuple[str, int, int]]:
    """The images the pages show, as ``images/<number>.png``: ``{image number: (path,
    width, height)}`` in the original's pixels."""
    from PIL import Image

    folder = out / "images"
    folder.mkdir(parents=True, exist_ok=True)
    names, found = store.images, {}
    for number_ in sorted(needed):
        name = names[number_]
        if name not in load:
            raise KeyError(f"image {name!r} of the store is not among the images given: pass the folder (or dataset) "
                           "the store was collected from")
        picture = load[name]().convert("RGB")
        width, height = picture.size
        if max(width, height) > SIDE:
            scale = SIDE / max(width, height)
            picture = picture.resize((max(1, round(width * scale)), max(1, round(height * scale))),
                                     Image.Resampling.LANCZOS)
        path = f"images/{number_}.png"
        picture.save(out / path, optimize=False)
        found[number_] = (path, width, height)
    return found


def _crop(image: tuple[str, int, int], box: list, attributes: dict, caption: str, prefix: str) -> str:
    path, width, height = image
    x0, y0, x1, y1 = box
    side = max(x1 - x0, y1 - y0) * (1 + 2 * MARGIN)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    vx = min(max(cx - side / 2, 0), max(width - side, 0))
    vy = min(max(cy - side / 2, 0), max(height - side, 0))
    data = " ".join(f'data-{key}="{_e(value)}"' for key, value in attributes.items())
    return (f'<figure class="crop" {data}><svg viewBox="{vx:.2f} {vy:.2f} {side:.2f} {side:.2f}" '
            f'preserveAspectRatio="xMidYMid meet"><image href="{prefix}{path}" x="0" y="0" width="{width}" '
            f'height="{height}"/><rect class="box" x="{x0:.2f}" y="{y0:.2f}" width="{x1 - x0:.2f}" '
            f'height="{y1 - y0:.2f}"/></svg><figcaption>{_e(caption)}</figcaption></figure>')


def _rgb(value: float, high: float) -> str:
    r, g, b = colours(torch.tensor(value / high if high > 0 else 0.0)).round().int().tolist()
    return f"rgb({r}, {g}, {b})"


def _overlay(image: tuple[str, int, int], boxes: torch.Tensor, values: torch.Tensor, name: str) -> str:
    path, width, height = image
    high = float(values.max()) if len(values) else 0.0
    cells = []
    for token, (box, value) in enumerate(zip(boxes.tolist(), values.tolist())):
        if any(math.isnan(v) for v in box):
            continue
        x0, y0, x1, y1 = box
        opacity = 0.0 if value <= 0 else 0.35 + 0.4 * min(1.0, value / high) if high > 0 else 0.0
        cells.append(f'<rect class="token" data-token="{token}" data-activation="{number(value)}" x="{x0:.2f}" '
                     f'y="{y0:.2f}" width="{x1 - x0:.2f}" height="{y1 - y0:.2f}" fill="{_rgb(value, high)}" '
                     f'fill-opacity="{opacity:.2f}"><title>token {token}: {number(value)}</title></rect>')
    ramp = ", ".join(_rgb(v, 1.0) for v in (0, 0.25, 0.5, 0.75, 1.0))
    return (f'<p>{_e(name)}: 0 <span class="ramp" style="background: linear-gradient(to right, {ramp})"></span> '
            f'{number(high)}</p><svg class="overlay" viewBox="0 0 {width} {height}"><image href="../{path}" x="0" '
            f'y="0" width="{width}" height="{height}"/>{"".join(cells)}</svg>')


def _histogram(edges: torch.Tensor, counts: torch.Tensor, sparse: bool) -> str:
    width, height, base = 420, 150, 130
    top = max(1, int(counts.max()))
    step = width / len(counts)
    bars = []
    for i, count in enumerate(counts.tolist()):
        tall = (base - 10) * math.log1p(count) / math.log1p(top)
        bars.append(f'<rect x="{i * step + 1:.1f}" y="{base - tall:.1f}" width="{step - 2:.1f}" height="{tall:.1f}">'
                    f'<title>{number(edges[i])} to {number(edges[i + 1])}: {count} rows</title></rect>')
    label = "rows where it fires, by activation (log scale)" if sparse else "rows by projection (log scale)"
    return (f'<svg class="histogram" viewBox="0 0 {width} {height}">{"".join(bars)}'
            f'<text x="0" y="{height - 4}">{number(edges[0])}</text><text x="{width}" y="{height - 4}" '
            f'text-anchor="end">{number(edges[-1])}</text><text x="{width / 2}" y="{height - 4}" '
            f'text-anchor="middle">{label}</text></svg>')


def _head(title: str, prefix: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="stylesheet" href="{prefix}style.css"></head><body>')


def _examples(found: Found, feature: int, store: Any, images: dict) -> list[dict]:
    index, names = store.index, store.images
    shown = []
    for row, value in zip(found.top_rows[feature].tolist(), found.top_values[feature].tolist()):
        if row < 0:
            continue
        image = int(index.image_id[row])
        shown.append({"row": row, "image": names[image], "image_number": image, "token": int(index.token[row]),
                      "box": [float(v) for v in index.box[row]], "activation": value})
    return shown


def write(out: Path, store: Any, value: str, reader: Reader, found: Found, images: dict,
          promotes: "list | None", title: str) -> Path:
    """The site: ``index.html``, ``feature/<i>.html`` for each feature that fires, the
    images, ``style.css``, ``site.js`` and ``data.json``."""
    (out / "feature").mkdir(parents=True, exist_ok=True)
    for asset in ("style.css", "site.js"):
        shutil.copyfile(ASSETS / asset, out / asset)
    features = []
    for feature, name in enumerate(reader.names):
        examples = _examples(found, feature, store, images)
        features.append({"id": feature, "name": name, "rate": float(found.rate[feature]),
                         "mean": float(found.mean[feature]), "max": float(found.high[feature]),
                         "page": f"feature/{feature}.html" if examples else None, "top": examples,
                         "promotes": promotes[feature] if promotes else None})
    about = (f"{value} at the {store.manifest['at']} tokens of {len(store.images)} images ({found.rows} rows) · "
             f"{Path(reader.source).name}")
    for entry in features:
        if entry["page"]:
            (out / entry["page"]).write_text(_page(entry, found, store, images, reader, title, about, len(features)))
    (out / "index.html").write_text(_index(features, images, title, about, reader.sparse))
    (out / "data.json").write_text(json.dumps({"title": title, "about": about, "value": value, "rows": found.rows,
                                               "features": features}, indent=1))
    return out


def _crops(examples: list, images: dict, prefix: str, limit: int | None = None) -> str:
    return "".join(_crop(images[e["image_number"]], e["box"],
                         {"row": e["row"], "image": e["image"], "token": e["token"], "box": _box_text(e["box"]),
                          "activation": number(e["activation"])},
                         f"{e['image']} · token {e['token']} · {number(e['activation'])}", prefix)
                   for e in examples[:limit])


def _tokens(promotes: "list | None") -> str:
    if not promotes:
        return ""
    return "".join(f'<span title="{number(logit)}">{_e(token)}</span>' for token, logit in promotes)


def _page(entry: dict, found: Found, store: Any, images: dict, reader: Reader, title: str, about: str,
          count: int) -> str:
    feature = entry["id"]
    rows = found.image_rows[feature]
    image_number = int(store.index.image_id[rows.start])
    nav = "".join(f'<a href="{feature + step}.html">{label}</a>' for step, label in ((-1, "← previous"), (1, "next →"))
                  if 0 <= feature + step < count)
    rate_label = "fires on" if reader.sparse else "positive on"
    promoted = (f'<h2>What it writes, through the unembedding</h2><p class="tokens" id="promotes">'
                f'{_tokens(entry["promotes"])}</p>') if entry["promotes"] else ""
    return (_head(f"{entry['name']} · {title}", "../") + f'<nav><a href="../index.html">all features</a>{nav}</nav>'
            f'<h1 data-feature="{feature}">{_e(entry["name"])}</h1><p class="about">{_e(about)}</p>'
            f'<p>{rate_label} {number(100 * entry["rate"])} % of rows · mean {number(entry["mean"])} · '
            f'max {number(entry["max"])}</p>'
            f'<h2>Top activations across the store</h2><div class="crops" id="top">'
            f'{_crops(entry["top"], images, "../")}</div>'
            f'<h2>Over its strongest image</h2><div id="image" data-image="{_e(store.images[image_number])}">'
            f'{_overlay(images[image_number], store.index.box[rows], found.image_values[feature], store.images[image_number])}'
            f'</div><h2>Activations</h2><div id="histogram">'
            f'{_histogram(found.edges[feature], found.counts[feature], reader.sparse)}</div>{promoted}'
            '</body></html>\n')


def _index(features: list, images: dict, title: str, about: str, sparse: bool) -> str:
    live = [entry for entry in features if entry["page"]]
    dead = [str(entry["id"]) for entry in features if not entry["page"]]
    rows = []
    for entry in live:
        words = " ".join([entry["name"], str(entry["id"]), *(t for t, _ in entry["promotes"] or [])]).lower()
        rows.append(f'<tr data-feature="{entry["id"]}" data-search="{_e(words)}" data-rate="{entry["rate"]}" '
                    f'data-mean="{entry["mean"]}" data-max="{entry["max"]}">'
                    f'<td><a href="{entry["page"]}">{_e(entry["name"])}</a></td>'
                    f'<td class="number">{number(100 * entry["rate"])} %</td>'
                    f'<td class="number">{number(entry["mean"])}</td><td class="number">{number(entry["max"])}</td>'
                    f'<td><div class="crops">{_crops(entry["top"], images, "", 4)}</div></td>'
                    f'<td class="tokens">{_tokens(entry["promotes"])}</td></tr>')
    rate = "fires on" if sparse else "positive on"
    never = f'<p class="about">Never fire ({len(dead)}): {", ".join(dead)}.</p>' if dead else ""
    return (_head(title, "") + f'<h1>{_e(title)}</h1><p class="about">{_e(about)}</p>'
            f'<p>{len(live)} of {len(features)} {"features fire" if sparse else "directions"}; <span id="shown">'
            f'{len(live)}</span> shown (a column\'s heading sorts by it).</p><input id="search" type="search" '
            f'placeholder="search: a feature id, a token it promotes" aria-label="search">'
            f'<table id="features"><thead><tr><th data-sort="feature">feature</th><th data-sort="rate">{rate}</th>'
            f'<th data-sort="mean">mean</th><th data-sort="max">max</th><th>top activations</th><th>promotes</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table>{never}'
            '<script src="site.js"></script></body></html>\n')
