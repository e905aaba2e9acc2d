"""Edits to call inside a trace or a generation: steering the stream, skipping blocks.

Both write the standard values, so they work on any family and land the way any edit
does (in place on the stream a block returns). Call them inside ``model.trace(...)`` or,
once per step, inside a generation's ``for step in tracer.iter[...]`` loop. Values are
served in forward order: call them before reading values the forward computes after
the blocks they edit.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..core.geometry import ImageGeometry
from .tokens import in_stream

Positions = "str | ImageGeometry | torch.Tensor | Sequence[int]"


def steer(model: Any, layers: "int | Sequence[int]", vector: torch.Tensor, positions: Any = "all",
          scale: float = 1.0) -> None:
    """Add ``scale * vector`` (``[hidden_size]``) to ``layers[i].layer_output`` for each
    block ``i`` in ``layers``, at ``positions``:

    * ``"all"``, every position; ``"text"`` or ``"image"``, the tokens
      `vision.image_token_mask` says are text or image (the mask is read first, so call
      this before reading any later value);
    * an `ImageGeometry` (from ``model.vision.geometry(prompt, images)``): that image's
      tokens, in its batch row;
    * a ``[batch, seq]`` boolean mask, or sequence positions (every row).
    """
    where = _where(model, positions)
    for layer in sorted({range(model.num_layers)[i] for i in ([layers] if isinstance(layers, int) else layers)}):
        stream = model.layers[layer].layer_output
        added = (scale * vector).to(stream.dtype)
        if where is None:
            stream[:] += added
        else:
            stream[where] += added


def _where(model: Any, positions: Any) -> Any:
    if isinstance(positions, str):
        if positions == "all":
            return None
        if positions not in ("text", "image"):
            raise ValueError(f"positions is 'all', 'text', 'image', an ImageGeometry, a mask or indices, not {positions!r}")
        mask = model.vision.image_token_mask.as_subclass(torch.Tensor)
        return mask if positions == "image" else ~mask
    if isinstance(positions, ImageGeometry):
        in_stream(model, "steer at an image's tokens")
        return positions.row, positions.positions
    positions = torch.as_tensor(positions)
    return positions if positions.dtype == torch.bool else (slice(None), positions)


def skip_layers(model: Any, start: int, end: int) -> None:
    """Blocks ``start`` to ``end`` (inclusive) pass their input through unchanged: each
    one's forward does not run, and its ``layer_output`` is its ``input``. Values inside
    a skipped block are never computed, so reading one is out of order. A block a later
    one depends on beside the stream (`Layer.why_not_skipped`) is refused, before the
    model runs."""
    skipped = range(range(model.num_layers)[start], range(model.num_layers)[end] + 1)
    for layer in skipped:
        reason = model.layers[layer].why_not_skipped(skipped)
        if reason:
            raise ValueError(f"layers[{layer}] cannot be skipped: {reason}")
    for layer in skipped:
        block = model.layers[layer]
        block.skip(block.input)
