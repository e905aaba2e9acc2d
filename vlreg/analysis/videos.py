"""Over a video's tokens, frame by frame: where a text token looks, and what its answer needs.

Each helper takes one prompt holding one video (as ``model.trace(prompt, videos=[video])``)
and scores the video's grids (`VideoGrid`: a temporal patch on the Qwen line, a frame on
LLaVA-OneVision's), or its tokens, with the frames each covers, from
`vision.geometry(prompt, videos=...)`: attention to each grid, a grid's features zeroed, a
token's replaced (`occlude_video_tokens`), a block's output at a grid patched from another
video (`patch_frame`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.video_geometry import VideoGeometry
from .edits import _replacement
from .tokens import _chunks, _layers, in_stream, stream_written, token_id, warn_if_turn_ended


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


@frozen
class TokenScores:
    """``scores`` ``[tokens]``, one per token of the video in sequence order, for the
    ``target`` logit at ``position``; ``frames`` ``[tokens, 2]``, the first and last frame
    each token covers (its box is ``geometry.boxes``)."""

    scores: torch.Tensor
    frames: torch.Tensor
    target: int
    position: int
    geometry: VideoGeometry


def occlude_video_tokens(model: Any, prompt: Any, video: Any, *, mode: "str | torch.Tensor" = "mean",
                         target: Any = None, position: int = -1, batch: int = 16, **options: Any) -> TokenScores:
    """`occlusion` over a video's tokens: the drop in the ``target`` logit (by default the
    unedited run's likeliest token) at ``position`` when one token's video features are
    replaced (``mode``: ``"mean"`` of the video's features, ``"zero"``, or a tensor
    ``[hidden_size]``). The edits run ``batch`` at a time as copies of the prompt in one
    batch, each chunk with one unedited copy the drops are measured against."""
    geometry, _ = _geometry(model, prompt, video, options)  # refuses a family that serves no video first
    in_stream(model, "occlude_video_tokens")
    warn_if_turn_ended(model, prompt, position, "occlude_video_tokens")
    if isinstance(mode, torch.Tensor) and mode.dim() != 1:
        raise ValueError("occlude_video_tokens takes a mode tensor of one row, [hidden_size]")
    wanted = None if target is None else token_id(model, target)
    drops = []
    for tokens in _chunks(geometry.tokens, batch):
        copies = len(tokens) + 1  # each copy's video rows follow the previous copy's, the last unedited
        rows = torch.tensor([k * geometry.tokens + geometry.offset + token for k, token in enumerate(tokens)])
        with torch.no_grad(), model.trace([prompt] * copies, videos=[video] * copies, **options):
            features = model.vision.video_features
            replacement = _replacement(features, geometry, mode, None)
            features[rows] = replacement.to(features.dtype) if isinstance(replacement, torch.Tensor) else replacement
            logits = model.logits[:, position].save()
        wanted = int(logits[-1].argmax()) if wanted is None else wanted
        drops.append(logits[-1, wanted] - logits[:-1, wanted])
    return TokenScores(torch.cat(drops).detach().float(), geometry.frames, wanted, position, geometry)


@frozen
class FramePatching:
    """The ``target`` logit at ``position`` when block ``layers[i]``'s output at grid
    ``grid``'s tokens is taken from the run on the source video: ``effects`` ``[layers]``,
    patched minus ``clean``; ``source``, the target logit on the source run; ``patched``, the
    patched runs' logits at ``position``, ``[layers, vocab]``; ``frames``, the grid's first
    and last frame."""

    grid: int
    frames: tuple[int, int]
    layers: tuple[int, ...]
    target: int
    position: int
    clean: float
    source: float
    effects: torch.Tensor
    patched: torch.Tensor
    geometry: VideoGeometry


def patch_frame(model: Any, prompt: Any, video: Any, source_video: Any, *, grid: int = 0, source_prompt: Any = None,
                layers: Sequence[int] | None = None, target: Any = None, position: int = -1,
                **options: Any) -> FramePatching:
    """`patch_image` over one grid of a video's tokens (a temporal patch, or a frame): patch
    ``layers[i].layer_output`` at grid ``grid``'s tokens from a run on ``source_video`` (and
    ``source_prompt``, by default ``prompt``) into the run on ``video``, one block a trace.
    Both videos must make the same grids (frame size and count). ``target`` defaults to the
    source run's likeliest token at ``position``."""
    geometry, spans = _geometry(model, prompt, video, options)  # refuses a family that serves no video first
    in_stream(model, "patch_frame")
    warn_if_turn_ended(model, prompt, position, "patch_frame")
    source_prompt = prompt if source_prompt is None else source_prompt
    donor, _ = _geometry(model, source_prompt, source_video, options)
    shape = [(g.rows, g.columns, g.tokens) for g in geometry.grids]
    if [(g.rows, g.columns, g.tokens) for g in donor.grids] != shape:
        raise ValueError("the source video's token grids differ from the target's: pass as many frames, of the "
                         "same size, as the target video")
    if not -len(spans) <= grid < len(spans):
        raise ValueError(f"grid {grid} is out of range: the video makes {len(spans)} grids")
    span = spans[grid]
    blocks = model.prompt_layers
    layers = _layers(model, layers, blocks)
    stream_written(model, "patch_frame", [blocks[layer] for layer in layers])
    saved: list = []
    with torch.no_grad(), model.trace(source_prompt, videos=[source_video], **options):
        for layer in layers:
            saved.append(blocks[layer].layer_output[donor.row, donor.positions[span]].save())
        source_logits = model.logits[donor.row, position].save()
    wanted = int(source_logits.argmax()) if target is None else token_id(model, target)
    with torch.no_grad(), model.trace(prompt, videos=[video], **options):
        clean = model.logits[geometry.row, position, wanted].save()
    runs = []
    for layer, stream in zip(layers, saved):
        with torch.no_grad(), model.trace(prompt, videos=[video], **options):
            blocks[layer].layer_output[geometry.row, geometry.positions[span]] = stream.detach()
            runs.append(model.logits[geometry.row, position].save())
    patched = torch.stack([run.detach() for run in runs])
    return FramePatching(grid=grid % len(spans), frames=geometry.grids[grid].frames, layers=layers, target=wanted,
                         position=position, clean=float(clean), source=float(source_logits[wanted]),
                         effects=(patched[:, wanted] - clean).float(), patched=patched, geometry=geometry)
