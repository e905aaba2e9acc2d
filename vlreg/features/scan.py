"""One streaming read of a store through a dictionary (or any directions): what a feature
browser shows of each feature, with memory bounded by the features, not the rows.

A `Reader` turns a chunk of a value's rows into activations ``[rows, features]``: a
dictionary's encoder, or the projections onto directions (a probe's weights, a steering
vector: ``rows @ direction``). `scan` reads the store's rows in order, chunk by chunk,
twice: the first pass keeps each feature's firing count, sum, extremes and its ``top``
strongest rows (merged chunk by chunk, so never all rows); the second fills each
feature's histogram between the extremes the first found. Then each feature's strongest
image is read whole (its rows are consecutive), for the activation over all its tokens.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from attrs import frozen


@frozen
class Reader:
    """Activations of rows: ``encode(rows [n, width]) -> [n, features]``; ``names`` label
    the features; ``directions`` ``[features, width]`` are what each writes into the value
    (a dictionary's decoder rows, the directions themselves), read through the unembedding;
    ``sparse``: a feature is off at 0 (a dictionary), so its histogram is of the rows
    where it fires, and its rate is the share of those; a direction's is of every row, its
    rate the share where it is positive."""

    encode: Callable[[torch.Tensor], torch.Tensor]
    names: tuple[str, ...]
    directions: torch.Tensor
    sparse: bool
    source: str

    @classmethod
    def of_dictionary(cls, dictionary: Any) -> "Reader":
        names = tuple(f"feature {i}" for i in range(dictionary.features))
        return cls(dictionary.encode, names, dictionary.W_dec.detach().float(), True, str(dictionary.source))

    @classmethod
    def of_directions(cls, directions: "dict[str, torch.Tensor]") -> "Reader":
        """Named directions, each ``[width]``: activations are ``rows @ direction``."""
        if not directions:
            raise ValueError("no directions given")
        stacked = torch.stack([torch.as_tensor(d, dtype=torch.float32).reshape(-1) for d in directions.values()])
        return cls(lambda rows: rows @ stacked.T, tuple(directions), stacked, False, "directions")


@frozen
class Found:
    """What `scan` found, per feature (``[features]`` tensors, float32 unless said):
    ``rate`` the share of rows where it fires (a direction: is positive), ``mean`` its mean
    where it fires (a direction: over every row), ``high`` and ``low`` its extremes;
    ``top_rows`` and ``top_values`` ``[features, top]`` its strongest rows (row -1 and
    NaN where it fired on fewer); ``edges`` ``[features, bins + 1]`` and ``counts``
    ``[features, bins]``, its histogram; ``image_values[f]`` its activation at every
    token of its strongest row's image (``image_rows[f]``, a slice of rows)."""

    rows: int
    rate: torch.Tensor
    mean: torch.Tensor
    high: torch.Tensor
    low: torch.Tensor
    top_rows: torch.Tensor
    top_values: torch.Tensor
    edges: torch.Tensor
    counts: torch.Tensor
    image_rows: list
    image_values: list


def _chunks(column: Any, size: int) -> Any:
    for start in range(0, len(column), size):
        yield start, column[start : start + size].float()


def scan(column: Any, reader: Reader, image_id: torch.Tensor, *, top: int = 16, bins: int = 24,
         chunk: int = 4096, per_image: int = 1) -> Found:
    """Read ``column`` (a store's value, ``[rows, width]``) through ``reader``. A feature's
    top rows are at most ``per_image`` from one image (so its examples are not one image's
    neighbouring tokens); ``image_id`` is the store index's ``[rows]`` image numbers."""
    features = len(reader.names)
    fired = torch.zeros(features, dtype=torch.float64)
    total = torch.zeros(features, dtype=torch.float64)
    high = torch.full((features,), -torch.inf)
    low = torch.full((features,), torch.inf)
    keep = top * per_image if per_image > 1 else top * 4  # room to drop same-image rows at the end
    best_values = torch.full((features, keep), -torch.inf)
    best_rows = torch.full((features, keep), -1, dtype=torch.long)
    with torch.no_grad():
        for start, rows in _chunks(column, chunk):
            acts = reader.encode(rows).float()
            active = acts > 0
            fired += active.sum(0)
            total += (acts * active).sum(0) if reader.sparse else acts.sum(0)
            high = torch.maximum(high, acts.max(0).values)
            low = torch.minimum(low, acts.min(0).values)
            k = min(keep, len(acts))
            values, where = acts.topk(k, dim=0)
            merged = torch.cat([best_values, values.T], dim=1)
            merged_rows = torch.cat([best_rows, where.T + start], dim=1)
            order = merged.topk(keep, dim=1).indices
            best_values, best_rows = merged.gather(1, order), merged_rows.gather(1, order)
    rows = len(column)
    rate = (fired / max(rows, 1)).float()
    mean = (total / (fired.clamp(min=1) if reader.sparse else max(rows, 1))).float()
    top_rows, top_values = _spread(best_rows, best_values, image_id, top, per_image, reader.sparse)
    edges, counts = _histograms(column, reader, high, low, bins, chunk)
    image_rows, image_values = _images(column, reader, image_id, top_rows[:, 0])
    return Found(rows, rate, mean, high, low, top_rows, top_values, edges, counts, image_rows, image_values)


def _spread(rows: torch.Tensor, values: torch.Tensor, image_id: torch.Tensor, top: int, per_image: int,
            sparse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Each feature's ``top`` strongest rows, at most ``per_image`` of one image; where it
    fires (a dictionary) only."""
    kept_rows = torch.full((len(rows), top), -1, dtype=torch.long)
    kept_values = torch.full((len(rows), top), float("nan"))
    for feature in range(len(rows)):
        seen: dict[int, int] = {}
        taken = 0
        for row, value in zip(rows[feature].tolist(), values[feature].tolist()):
            if row < 0 or (sparse and value <= 0) or taken == top:
                continue
            image = int(image_id[row])
            if seen.get(image, 0) >= per_image:
                continue
            seen[image] = seen.get(image, 0) + 1
            kept_rows[feature, taken], kept_values[feature, taken] = row, value
            taken += 1
    return kept_rows, kept_values


def _histograms(column: Any, reader: Reader, high: torch.Tensor, low: torch.Tensor, bins: int,
                chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The second pass: ``bins`` equal bins from ``low`` (0 for a dictionary: its
    histogram is of the rows where a feature fires) to ``high``, per feature."""
    start = torch.zeros_like(low) if reader.sparse else low
    stop = torch.where(high > start, high, start + 1)
    width = (stop - start) / bins
    features = len(high)
    counts = torch.zeros(features * bins, dtype=torch.long)
    offsets = torch.arange(features) * bins
    with torch.no_grad():
        for _, rows in _chunks(column, chunk):
            acts = reader.encode(rows).float()
            which = ((acts - start) / width).floor().long().clamp(0, bins - 1) + offsets
            counted = acts > 0 if reader.sparse else torch.ones_like(acts, dtype=torch.bool)
            counts += torch.bincount(which[counted], minlength=features * bins)
    edges = start[:, None] + width[:, None] * torch.arange(bins + 1)
    return edges, counts.reshape(features, bins)


def _images(column: Any, reader: Reader, image_id: torch.Tensor, first: torch.Tensor) -> tuple[list, list]:
    """Each feature's activation over every token of its strongest row's image (each
    image read and encoded once, whatever the features that need it)."""
    changes = torch.nonzero(image_id[1:] != image_id[:-1])[:, 0] + 1
    starts = torch.cat([torch.zeros(1, dtype=torch.long), changes])
    stops = torch.cat([changes, torch.tensor([len(image_id)])])
    span = {int(image_id[s]): slice(int(s), int(e)) for s, e in zip(starts, stops)}
    wanted: dict[int, list[int]] = {}
    for feature, row in enumerate(first.tolist()):
        if row >= 0:
            wanted.setdefault(int(image_id[row]), []).append(feature)
    rows_of: list = [None] * len(first)
    values_of: list = [None] * len(first)
    with torch.no_grad():
        for image, features in wanted.items():
            part = span[image]
            acts = reader.encode(column[part].float()).float()
            for feature in features:
                rows_of[feature], values_of[feature] = part, acts[:, feature].clone()
    return rows_of, values_of


def promoted(reader: Reader, unembedding: torch.Tensor, decode: Callable[[int], str], count: int = 8) -> list:
    """Per feature, the ``count`` tokens its direction raises most through the unembedding
    (``direction @ unembedding.T``: the logits it adds, the final norm left out), as
    ``[(token text, logit), ...]``; ``decode`` turns a token id into its text."""
    logits = reader.directions @ unembedding.float().T
    best = logits.topk(min(count, logits.shape[1]), dim=1)
    return [[(decode(i), float(v)) for i, v in zip(ids.tolist(), values)] for ids, values in zip(best.indices, best.values)]
