"""``.grad`` on every served value, inside nnsight's ``with metric.backward():``: what a
served value records, and how its gradient is read (`vlreg.core.serving.backward` serves it).

vlreg serves most values as a view of what the model computes (an element of a tuple, a
reshape, a select, one image's rows). A view is not on autograd's path to the metric, so
nnsight's hook on it never fires. The gradient the user means is that of the tensor the
model goes on to use, mapped through the same view: the view's elements *are* that
tensor's elements. So:

* `mark` runs on every value as it is served, handed what its `Site`'s location held.
  Its *source* is the tensor there whose elements it views (`source_of`), or the served
  tensor itself where it views none (a copy the model then uses in its place). A hook goes
  on the source there and then (once per source), so it sees the gradient of the source as
  it was served, even where the model later edits it in place (Gemma 3n scales its tower's
  grid); it does nothing outside a vlreg backward.
* The served value's gradient is the source's gradient laid over the source's span of
  storage (`lay`) and read with the served tensor's own strides (`strided`): the
  geometry that made the view. An assignment writes there, so the gradient that flows on
  is the source's with the view's elements replaced: the inverse view.

What cannot carry a gradient is refused in vlreg's words (`vlreg.Unavailable`,
`Source.refusal`) when its ``.grad`` is asked for: integers (codes, ids, masks), a value
computed without gradient tracking (a ``generate`` trace, ``torch.no_grad``, a replayed
tower cache), a value the envoy computes that the model never uses (`why_no_gradient` on
its class: a collapse of several streams).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch
from greenlet import getcurrent
from nnsight.intervention import backward as native
from torch.autograd.graph import get_gradient_edge


# Kept on nnsight's module, so every copy of this one shares them: a trace run as
# remote="local" re-imports vlreg's modules for the server side.
#: The vlreg backwards running now, innermost last (`vlreg.core.serving.backward`); the
#: sources' hooks serve the last.
ACTIVE: list = native.__dict__.setdefault("_vlreg_active", [])
_numbers = native.__dict__.setdefault("_vlreg_numbers", itertools.count())


#: What a model whose weights are frozen lets a user do (an NDIF deployment loads them so).
FROZEN = ("weights frozen with requires_grad_(False), as an NDIF model actor loads them; let the weights require "
          "gradients, or, where they cannot (a server), call model.token_embeddings.requires_grad_() first in the "
          "trace: the text stream's values from there on carry gradients, the image's values before it do not "
          "(docs/remote.md)")


class Source:
    """What `mark` records on a served tensor (and on its source, labelled as a view of the
    first value served from it): its label, its source's number (``None`` where it carries
    no gradient), the source's storage geometry (`_geometry`) and gradient edge as served,
    the envoy it was read on, and whether gradients were being tracked."""

    __slots__ = ("label", "number", "geometry", "edge", "envoy", "tracked")

    def __init__(self, label: str, number: int | None, geometry: tuple, edge: Any, envoy: Any, tracked: bool) -> None:
        self.label, self.number, self.geometry, self.edge = label, number, geometry, edge
        self.envoy, self.tracked = envoy, tracked

    def __reduce__(self) -> tuple:
        # a tensor pickles its __dict__: its gradient's hook, edge and envoy are this run's
        return _dropped, ()

    def refusal(self, served: torch.Tensor) -> str | None:
        """Why ``served`` carries no gradient, or ``None``."""
        if not (served.is_floating_point() or served.is_complex()):
            return (f"it holds {str(served.dtype).removeprefix('torch.')} values (ids, codes or a mask), which are "
                    "discrete: no gradient flows through them; read the gradient of what the model makes of them "
                    "(their embeddings: vision.image_features, layers[0].input)")
        why = getattr(type(self.envoy), "why_no_gradient", None)
        reason = why(self.envoy, self.label.rsplit(".", 1)[-1]) if why is not None else None
        if reason:
            return reason
        if self.number is not None:
            return None
        run = self.envoy.run
        if run.generating:
            return ("a generate trace runs without gradients (transformers' generate runs under torch.no_grad()); "
                    "read gradients in a model.trace of the same prompt")
        if run.replaying:
            return ("this trace replays the tower's cached output (TowerCache.replay), which was made without "
                    "gradients; trace without replaying the cache")
        if not self.tracked:
            return "it was computed without gradient tracking (under torch.no_grad()); trace without it"
        return f"it was computed from tensors none of which require a gradient ({FROZEN})"


def _dropped() -> None:
    """What a pickled `Source` becomes: nothing (a saved value sent home keeps no hook)."""
    return None


def tensors_in(raw: Any) -> list[torch.Tensor]:
    """The tensors a location's raw value holds (in tuples, lists, dicts, model outputs)."""
    if isinstance(raw, torch.Tensor):
        return [raw]
    if isinstance(raw, dict):
        return [t for item in raw.values() for t in tensors_in(item)]
    if isinstance(raw, (list, tuple)):
        return [t for item in raw for t in tensors_in(item)]
    return []


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """The first and one past the last storage position ``tensor``'s elements occupy."""
    start = tensor.storage_offset()
    return start, start + 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()) if size)


def source_of(served: torch.Tensor, raw: Any) -> torch.Tensor:
    """The tensor whose gradient ``served`` reads: the one of ``raw`` (what the location
    held) whose elements it views, or, where it views none, ``served`` itself (a copy the
    model uses in its place). A location nnsight narrowed to an invoke's rows gives the
    whole batch's tensor (the narrowed view's base), which the model uses."""
    pointer, (start, end) = served.untyped_storage().data_ptr(), _span(served)
    for tensor in tensors_in(raw):
        if tensor is served or (tensor.untyped_storage().data_ptr() == pointer
                                and _span(tensor)[0] <= start and end <= _span(tensor)[1]):
            if getattr(tensor, "_nnsight_batch", False) and tensor._base is not None:
                return tensor._base
            return tensor
    return served


def mark(envoy: Any, label: str, served: Any, raw: Any = None) -> Any:
    """Record on ``served`` (a tensor, or a list of them) what ``.grad`` needs, and hook
    its source (once) where it carries a gradient."""
    if isinstance(served, (list, tuple)):
        for index, each in enumerate(served):
            mark(envoy, f"{label}[{index}]", each, raw)
        return served
    if not isinstance(served, torch.Tensor):
        return served
    tracked = torch.is_grad_enabled()
    if not served.requires_grad:
        served._vlreg_source = Source(label, None, (), None, envoy, tracked)
        _remember(envoy)
        return served
    source = source_of(served, raw)
    known = source.__dict__.get("_vlreg_source")
    if known is None or known.number is None:
        number, geometry = next(_numbers), _geometry(source)
        named = label if source is served else f"a view of {label}"
        known = Source(named, number, geometry, get_gradient_edge(source), envoy, tracked)
        source.register_hook(functools.partial(_arrive, number, geometry))
        source._vlreg_source = known
        owner = source._base if source._base is not None else source
        if owner is not source:
            owner.__dict__.setdefault("_vlreg_sources", []).append(known)
    if source is not served:
        served._vlreg_source = Source(label, known.number, known.geometry, known.edge, envoy, tracked)
    _remember(envoy)
    return served


def _remember(envoy: Any) -> None:
    """Note the model on the trace's worker: what a metric without a gradient is refused by."""
    running = worker()
    if running is not None and not hasattr(running, "vlreg_model"):
        running.vlreg_model = envoy.root


def worker() -> Any:
    """The nnsight worker running this code (a trace's invoke), or ``None``."""
    mediator = getattr(getcurrent(), "mediator", None)
    return mediator() if mediator is not None else None


def _geometry(source: torch.Tensor) -> tuple:
    """``(shape, stride, offset, start, span, dense)``: where the source's elements sit in
    its storage, from ``start`` on, over ``span`` positions (``dense``: all of them, in
    order)."""
    start, end = _span(source)
    dense = source.is_contiguous() and end - start == source.numel()
    return tuple(source.shape), source.stride(), source.storage_offset(), start, end - start, dense


def lay(geometry: tuple, grad: torch.Tensor, private: bool) -> torch.Tensor:
    """The source's gradient laid over the source's span of storage, flat (a copy if
    ``private``): a view of the source at storage position ``p`` reads it at ``p - start``.
    Where several of the source's elements share a position (an ``expand``ed tensor), their
    gradients add up there, as they do for the tensor it was expanded from."""
    shape, stride, offset, start, span, dense = geometry
    if dense and grad.is_contiguous():
        flat = grad.reshape(-1)
        return flat.clone() if private else flat
    room = grad.new_zeros(span)
    positions = torch.arange(span, device=grad.device).as_strided(shape, stride, offset - start)
    return room.index_add_(0, positions.reshape(-1), grad.reshape(-1))


def strided(room: torch.Tensor, tensor: torch.Tensor, geometry: tuple) -> torch.Tensor:
    """What ``tensor`` (a view of the source, or the source) reads of ``lay``."""
    return room.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset() - geometry[3])


def _arrive(number: int, geometry: tuple, grad: torch.Tensor) -> torch.Tensor | None:
    """A source's hook: hand its gradient to the vlreg backward running, if any."""
    return ACTIVE[-1].arrive(number, geometry, grad) if ACTIVE else None


def found(tensor: torch.Tensor) -> Source | None:
    """The `Source` of a served value, or of a view the user made of one (within a source)."""
    source = tensor.__dict__.get("_vlreg_source")
    if source is not None or tensor._base is None:
        return source
    owner = tensor._base
    start, end = _span(tensor)
    for known in [owner.__dict__.get("_vlreg_source"), *(owner.__dict__.get("_vlreg_sources") or ())]:
        if known is not None and known.number is not None and known.geometry[3] <= start \
                and end <= known.geometry[3] + known.geometry[4]:
            return known
    return None

