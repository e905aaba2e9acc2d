"""Over a video's tokens, frame by frame: where a text token looks, and what its answer needs.

Each helper takes one prompt holding one video (as ``model.trace(prompt, videos=[video])``)
and scores the video's grids (`VideoGrid`: a temporal patch on the Qwen line, a frame on
LLaVA-OneVision's), with the frames each covers, from `vision.geometry(prompt, videos=...)`.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.video_geometry import VideoGeometry
from .tokens import _layers, token_id


@frozen
class FrameScores:
    """``scores`` ``[..., grids]``, one per grid of the video's tokens in sequence order;
    ``frames`` ``[grids, 2]``, the first and last frame of the video as passed each covers."""

    scores: torch.Tensor
    frames: torch.Tensor
    geometry: VideoGeometry


def _geometry(model: Any, prompt: Any, video: Any, options: dict) -> tuple[VideoGeometry, list[slice]]:
    (geometry,) = model.vision.geometry(prompt, videos=[video], **options)
    spans, start = [], 0
    for grid in geometry.grids:
        spans.append(slice(start, start + grid.tokens))
        start += grid.tokens
    return geometry, spans


def _frames(geometry: VideoGeometry) -> torch.Tensor:
    return torch.tensor([grid.frames for grid in geometry.grids])


def attention_to_frames(model: Any, prompt: Any, video: Any, *, position: int = -1,
                        layers: Sequence[int] | None = None, **options: Any) -> FrameScores:
    """How much the text token at ``position`` attends to each grid of the video's tokens,
    block by block, averaged over heads: ``scores`` ``[layers, grids]`` (rows of the eager
    pattern: with the rest of the sequence they sum to 1). Loads with
    ``attn_implementation="eager"`` only, where the pattern is formed."""
    geometry, spans = _geometry(model, prompt, video, options)
    attending = [index for index, block in enumerate(model.layers) if "self_attn" in block.__dict__]
    layers = _layers(model, attending if layers is None else layers, model.layers)
    if set(layers) - set(attending):
        raise Unavailable(f"attention_to_frames is unavailable at layers {sorted(set(layers) - set(attending))}: "
                          f"those blocks have no self_attn; the blocks that attend are {attending}")
    rows: list = []
    with torch.no_grad(), model.trace(prompt, videos=[video], **options):
        for layer in layers:
            rows.append(model.layers[layer].self_attn.attention_probabilities[geometry.row, :, position].save())
    pattern = torch.stack([row.detach().float().mean(0) for row in rows])[:, geometry.positions]  # [layers, tokens]
    return FrameScores(torch.stack([pattern[:, span].sum(-1) for span in spans], -1), _frames(geometry), geometry)


def occlude_frames(model: Any, prompt: Any, video: Any, *, target: Any = None, position: int = -1,
                   **options: Any) -> FrameScores:
    """The drop in the ``target`` logit (a token id or string; by default the clean run's
    likeliest token) at ``position`` when one grid's video features are zeroed, for each
    grid: ``scores`` ``[grids]``, one trace a grid."""
    geometry, spans = _geometry(model, prompt, video, options)
    with torch.no_grad(), model.trace(prompt, videos=[video], **options):
        clean = model.logits[geometry.row, position].save()
    wanted = int(clean.argmax()) if target is None else token_id(model, target)
    scores = []
    for span in spans:
        rows = range(geometry.features.start + span.start, geometry.features.start + span.stop)
        with torch.no_grad(), model.trace(prompt, videos=[video], **options):
            model.vision.video_features[rows.start:rows.stop] = 0
            edited = model.logits[geometry.row, position].save()
        scores.append(float(clean[wanted] - edited[wanted]))
    return FrameScores(torch.tensor(scores), _frames(geometry), geometry)
