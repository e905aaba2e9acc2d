"""Blocks that carry several parallel streams: `StreamsLayer`.

Some text models widen the residual stream into several streams that run side by side,
``[streams, batch, seq, hidden]``; a block updates one of them (the *active* one) with
its sublayers and the others from it (Gemma 3n's AltUp: a predict step before the
sublayers, a correct step after them). The standard values keep their meaning and their
shapes on such a block, so every helper that reads or edits a block's stream works on it:

* ``input`` and ``layer_output`` are the active stream, ``[batch, seq, hidden]``: what
  the sublayers work on. Each is a view into what the block takes or returns, so an
  in-place edit lands there, and an assignment replaces that stream alone;
* ``input_streams`` and ``layer_streams`` are every stream, as the block takes and
  returns them, ``[streams, batch, seq, hidden]``;
* ``output`` is what the block returns, as it returns it (every stream).

None of these has the batch as its leading axis, and nnsight narrows a tensor to an
invoke's rows along that axis whenever its size happens to be the batch's: every value
here is served whole and cut to an invoke's rows by vlreg (`vlreg.core.serving.batching`:
``"rows"`` for the active stream, ``"streams"`` for every stream, whose batch is the second
axis). A skipped block (`Layer.skipped_output`) hands on every stream it took.
"""

from __future__ import annotations

from typing import Any

import torch
from nnsight.intervention.util import first_input, replace_first_input

from ..errors import Unavailable
from ..serving.values import first, value, with_first
from .text import Layer


class StreamsLayer(Layer):
    """A block whose stream is ``[streams, batch, seq, hidden]``: ``input`` and
    ``layer_output`` are its active stream (`active_stream`), ``input_streams`` and
    ``layer_streams`` every stream. A family's subclass says which stream is active and
    how many there are (its config does)."""

    order = ("input", "input_streams", "self_attn", "linear_attn", "mamba", "mlp", "output", "layer_streams",
             "layer_output")

    @property
    def active_stream(self) -> int:
        """The stream the block's sublayers read and update."""
        return 0

    @property
    def num_streams(self) -> int:
        """How many streams the block carries (its family's class reads it off the config)."""
        raise Unavailable(f"{self.label('num_streams')} is unavailable: {type(self).__name__} does not say how many "
                          f"streams its blocks carry; its family's envoy class can")

    def with_active(self, streams: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """A copy of ``streams`` whose active stream is ``new``: how a write to a value of
        the active stream is put back among the others."""
        replaced = streams.clone()
        replaced[self.active_stream] = new
        return replaced

    input = value("input", layout="rows", description="the active stream entering the block, [batch, seq, hidden]")(
        lambda layer, raw: first_input(*raw)[layer.active_stream]
    ).writes(lambda layer, raw, new: replace_first_input(*raw, layer.with_active(first_input(*raw), new)))

    input_streams = value(
        "input", layout="streams", description="every stream entering the block, [streams, batch, seq, hidden]"
    )(lambda layer, raw: first_input(*raw)).writes(lambda layer, raw, new: replace_first_input(*raw, new))

    output = value("output", layout="streams", description="what the block returns, as it returns it (every stream)")(
        lambda layer, raw: raw
    ).writes(lambda layer, raw, new: new)

    layer_streams = value(
        "output", layout="streams", description="every stream leaving the block, [streams, batch, seq, hidden]"
    )(lambda layer, raw: first(raw)).writes(with_first)

    layer_output = value(
        "output", layout="rows", description="the active stream leaving the block, [batch, seq, hidden]"
    )(lambda layer, raw: first(raw)[layer.active_stream]).writes(
        lambda layer, raw, new: with_first(layer, raw, layer.with_active(first(raw), new))
    )

    def skipped_output(self) -> Any:
        """Every stream the block takes: what it hands on when skipped."""
        return self.passed_through(self.input_streams)
