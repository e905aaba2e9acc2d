"""Blocks that carry several parallel streams: `StreamsLayer`, `MixingStreamsLayer`.

Some text models widen the residual stream into several streams that run side by side. A
family says how they lie (``streams_layout``):

* ``"stacked"``, ``[streams, batch, seq, hidden]``: Gemma 3n's AltUp, a block updating one
  stream (the *active* one) with its sublayers and the others from it;
* ``"packed"``, ``[batch, seq, streams * hidden]``: Qwen4-Exp's hyper-connections, each
  sublayer reading a learned mix of every stream and writing every stream with a weight;
* ``"axis"``, ``[batch, seq, streams, hidden]``: GLM-5-Next's manifold-constrained
  hyper-connections.

The standard values keep their meaning and their shapes on such a block, so every helper
that reads or edits a block's stream works on it:

* ``input`` and ``layer_output`` are ``[batch, seq, hidden]``: on a `StreamsLayer` the
  active stream (a view, so an in-place edit lands there, and an assignment replaces that
  stream alone); on a `MixingStreamsLayer` the collapse the family declares (`collapse`:
  what its readout reads the streams as, so the logit lens of ``layer_output`` is the
  model's), written back through its `expand`, or read-only where the collapse has none;
* ``input_streams`` and ``layer_streams`` are every stream, in the family's own layout, as
  the block takes and returns them;
* ``output`` is what the block returns, as it returns it (every stream).

A stacked value does not have the batch as its leading axis, and nnsight narrows a tensor
to an invoke's rows along that axis whenever its size happens to be the batch's: such a
value is served whole and cut to an invoke's rows by vlreg (`vlreg.core.serving.batching`:
``"rows"`` for one stream, ``"streams"`` for every stream, whose batch is the second axis).
A skipped block (`Layer.skipped_output`) hands on every stream it took. A block whose
output is no plain sum of its sublayers states its own identity (`Layer.identity`), which
the conformance suite checks.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import torch
from nnsight.intervention.util import first_input, replace_first_input

from ..errors import Unavailable
from ..serving.refusals import read_only
from ..serving.values import first, value, with_first
from .text import Layer


#: How a block's streams lie (`StreamsLayer.streams_layout`).
STREAMS_LAYOUTS = ("stacked", "packed", "axis")


def _streams_batching(layer: Any) -> str:
    return "streams" if layer.streams_layout == "stacked" else "batch"


def _stream_batching(layer: Any) -> str:
    return "rows" if layer.streams_layout == "stacked" else "batch"


class StreamsLayer(Layer):
    """A block of several streams (``streams_layout``): ``input`` and ``layer_output`` are
    its active stream (`active_stream`), ``input_streams`` and ``layer_streams`` every
    stream. A family's subclass says which stream is active and how many there are (its
    config does)."""

    order = ("input", "input_streams", "self_attn", "linear_attn", "mamba", "mlp", "output", "layer_streams",
             "layer_output")
    #: How the streams lie: ``"stacked"``, ``"packed"`` or ``"axis"`` (`STREAMS_LAYOUTS`).
    streams_layout: ClassVar[str] = "stacked"

    @property
    def active_stream(self) -> int:
        """The stream the block's sublayers read and update."""
        return 0

    @property
    def num_streams(self) -> int:
        """How many streams the block carries (its family's class reads it off the config)."""
        raise Unavailable(f"{self.label('num_streams')} is unavailable: {type(self).__name__} does not say how many "
                          f"streams its blocks carry; its family's envoy class can")

    def each_stream(self, streams: torch.Tensor) -> torch.Tensor:
        """``streams`` in the family's layout as ``[streams, batch, seq, hidden]``: a view."""
        if self.streams_layout == "stacked":
            return streams
        if self.streams_layout == "packed":
            return streams.unflatten(-1, (self.num_streams, -1)).movedim(-2, 0)
        if self.streams_layout == "axis":
            return streams.movedim(-2, 0)
        raise ValueError(f"{type(self).__name__}.streams_layout is {self.streams_layout!r}, not one of "
                         f"{STREAMS_LAYOUTS}")

    def with_active(self, streams: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """A copy of ``streams`` whose active stream is ``new``: how a write to a value of
        the active stream is put back among the others."""
        replaced = streams.clone()
        self.each_stream(replaced)[self.active_stream] = new
        return replaced

    input = value("input", layout="rows", description="the active stream entering the block, [batch, seq, hidden]")(
        lambda layer, raw: layer.each_stream(first_input(*raw))[layer.active_stream]
    ).writes(lambda layer, raw, new: replace_first_input(*raw, layer.with_active(first_input(*raw), new)))

    input_streams = value(
        "input", layout=_streams_batching, description="every stream entering the block, in its layout"
    )(lambda layer, raw: first_input(*raw)).writes(lambda layer, raw, new: replace_first_input(*raw, new))

    output = value("output", layout=_streams_batching,
                   description="what the block returns, as it returns it (every stream)")(
        lambda layer, raw: raw
    ).writes(lambda layer, raw, new: new)

    layer_streams = value(
        "output", layout=_streams_batching, description="every stream leaving the block, in its layout"
    )(lambda layer, raw: first(raw)).writes(with_first)

    layer_output = value(
        "output", layout="rows", description="the active stream leaving the block, [batch, seq, hidden]"
    )(lambda layer, raw: layer.each_stream(first(raw))[layer.active_stream]).writes(
        lambda layer, raw, new: with_first(layer, raw, layer.with_active(first(raw), new))
    )

    def skipped_output(self) -> Any:
        """Every stream the block takes: what it hands on when skipped."""
        return self.passed_through(self.input_streams)


def _no_expand(layer: Any) -> str | None:
    if type(layer).expand is not MixingStreamsLayer.expand:
        return None
    return (f"it is the collapse of every stream {type(layer).__name__} reads them out as, which no write to "
            f"one tensor can set; edit input_streams or layer_streams, every stream")


def _collapsed(layer: Any, raw: Any, new: Any, streams_of: Callable, put: Callable) -> Any:
    """``raw`` with its streams expanded from an edited collapse ``new``, or as it is where
    the value takes no write."""
    if layer.why_read_only("layer_output") is not None or torch.equal(new, _read(layer, streams_of(raw))):
        return raw  # unedited: the model goes on with its own tensor (and its gradient's path)
    return put(raw, layer.expand(streams_of(raw), new))


def _read(layer: Any, streams: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return layer.collapse(streams)


class MixingStreamsLayer(StreamsLayer):
    """A block whose streams mix (hyper-connections): no stream is the one the sublayers
    update, so ``input`` and ``layer_output`` are the collapse the family declares
    (`collapse`, the one its readout applies), ``[batch, seq, hidden]``, computed from every
    stream. A write lands through `expand` (every stream moved so that their collapse is
    what was written); a family whose collapse has no such inverse leaves `expand` alone,
    and the two values are then read-only, naming ``layer_streams``."""

    refuses = {"input": read_only(_no_expand), "layer_output": read_only(_no_expand)}

    def why_no_gradient(self, name: str) -> str | None:
        """``input`` and ``layer_output`` are computed here from every stream, and the model
        goes on to use the streams, not them: they carry no gradient of their own."""
        if name not in ("input", "layer_output"):
            return None
        every = "input_streams" if name == "input" else "layer_streams"
        return (f"it is the collapse of every stream vlreg computes for reading, which the model does not go on to "
                f"use, so no gradient reaches it; read {every}.grad, the gradient of every stream")

    def collapse(self, streams: torch.Tensor) -> torch.Tensor:
        """``[batch, seq, hidden]`` from every stream in the family's layout (computed for
        reading, without gradient tracking: see `why_no_gradient`)."""
        return self.each_stream(streams).mean(0)

    def expand(self, streams: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """Every stream, in the family's layout, such that `collapse` gives ``new``."""
        raise NotImplementedError

    input = value("input", layout=_stream_batching, description="the streams entering the block as the readout collapses "
                                                      "them, [batch, seq, hidden]")(
        lambda layer, raw: _read(layer, first_input(*raw))
    ).writes(lambda layer, raw, new: replace_first_input(*raw, layer.expand(first_input(*raw), new))).transform(
        lambda layer, view, raw: _collapsed(layer, raw, view, lambda r: first_input(*r),
                                            lambda r, streams: replace_first_input(*r, streams)))

    layer_output = value(
        "output", layout=_stream_batching, description="the streams leaving the block as the readout collapses them, "
                                             "[batch, seq, hidden]"
    )(lambda layer, raw: _read(layer, first(raw))).writes(
        lambda layer, raw, new: with_first(layer, raw, layer.expand(first(raw), new))
    ).transform(lambda layer, view, raw: _collapsed(layer, raw, view, first,
                                                    lambda r, streams: with_first(layer, r, streams)))
