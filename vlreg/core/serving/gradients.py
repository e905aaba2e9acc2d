"""``.grad`` on every served value, inside nnsight's ``with metric.backward():``.

vlreg serves most values as a view of what the model computes (an element of a tuple, a
reshape, a select, one image's rows). A view is not on autograd's path to the metric, so
nnsight's hook on it never fires. The gradient the user means is that of the tensor the
model goes on to use, mapped through the same view: the view's elements *are* that
tensor's elements. So:

* `mark` runs on every value as it is served. Its *source* is the tensor owning its
  storage (``served._base``, or the served tensor itself where it is no view: the tensor
  at the location, or a copy the model then uses in its place), which the model computed
  and goes on to use, so autograd reaches it. A hook goes on the source there and then
  (once per source), so it sees the gradient of the source as it was served, even where
  the model later edits it in place (Gemma 3n scales its tower's grid).
* The served value's gradient is the source's gradient laid over the source's storage and
  read with the served tensor's own strides (`_room`, `_strided`): the geometry that made
  the view. An assignment (``value.grad = g``) writes ``g`` there, so the gradient that
  flows on is the source's with the view's elements replaced: the inverse view.
* The hook does nothing outside a vlreg backward. Inside one, gradients arrive in the
  reverse of the forward order, and one that arrives while the block waits for another is
  kept, so reads may come in any order. An assignment must come while its gradient flows
  (before the block asks for one the backward computes later); later it is refused,
  naming the values in vlreg's terms (`GradientOutOfOrder`). A read in order is the
  gradient itself (in-place edits of it land); a read after the backward moved on refuses
  edits (`vlreg.ReadOnly`).

What cannot carry a gradient is refused in vlreg's words (`vlreg.Unavailable`) when its
``.grad`` is asked for, before the backward computes it: integers (codes, ids, masks), a
value computed without gradient tracking (a ``generate`` trace, ``torch.no_grad``, a
replayed tower cache); a metric with no gradient at all is refused before the backward
runs. A value the metric does not depend on never gets a gradient, and reading it says so
once the backward is over. ``metric.backward(inputs=[...])`` takes served values by the
gradient edge of their source as served, so nothing else accumulates a gradient.

nnsight's backward module is patched once, at import (`install`): its ``with t.backward():``
builds `BackwardTracer`, whose ``.grad`` serves vlreg's values this way and every other
tensor as nnsight does.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import torch
from greenlet import getcurrent
from nnsight.intervention import backward as native
from nnsight.intervention.interleaver import Mediator, OutOfOrderError
from torch.autograd.graph import get_gradient_edge

from ..errors import OutOfOrder, Unavailable
from .values import read_only_view, serve_hooks


class GradientOutOfOrder(OutOfOrder):
    """A served value's gradient asked for where the backward cannot give it: assigned
    after it flowed on, or never reached by the backward."""


# Kept on nnsight's module, so every copy of this one shares them: a trace run as
# remote="local" re-imports vlreg's modules for the server side.
#: The vlreg backwards running now, innermost last; the sources' hooks serve the last.
_ACTIVE: list["_Backward"] = native.__dict__.setdefault("_vlreg_active", [])
_numbers = native.__dict__.setdefault("_vlreg_numbers", itertools.count())
_NativeTracer = native.__dict__.setdefault("_vlreg_native_tracer", native.BackwardTracer)
_native_property = native.__dict__.setdefault("_vlreg_native_property", native._grad_property)


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
        return ("it was computed from tensors none of which require a gradient (weights frozen with "
                "requires_grad_(False)); let the weights require gradients")


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
    worker = _worker()
    if worker is not None and not hasattr(worker, "vlreg_model"):
        worker.vlreg_model = envoy.root


def _worker() -> Any:
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


def _room(geometry: tuple, grad: torch.Tensor, private: bool) -> torch.Tensor:
    """The source's gradient laid over the source's span of storage, flat (a copy if
    ``private``): a view of the source at storage position ``p`` reads it at ``p - start``."""
    shape, stride, offset, start, span, dense = geometry
    if dense and grad.is_contiguous():
        flat = grad.reshape(-1)
        return flat.clone() if private else flat
    room = grad.new_zeros(span)
    room.as_strided(shape, stride, offset - start).copy_(grad)
    return room


def _strided(room: torch.Tensor, tensor: torch.Tensor, geometry: tuple) -> torch.Tensor:
    """What ``tensor`` (a view of the source, or the source) reads of ``room``."""
    return room.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset() - geometry[3])


def _arrive(number: int, geometry: tuple, grad: torch.Tensor) -> torch.Tensor | None:
    """A source's hook: hand its gradient to the vlreg backward running, if any."""
    return _ACTIVE[-1].arrive(number, geometry, grad) if _ACTIVE else None


class _Backward:
    """One backward's gradients of served values: what has arrived (each source's room),
    which source's gradient is flowing now, the last value asked for."""

    def __init__(self) -> None:
        self.interleaver: Any = None
        self.arrived: dict[int, tuple[torch.Tensor, tuple, bool]] = {}
        self.flowing: int | None = None
        self.last: str | None = None

    def arrive(self, number: int, geometry: tuple, grad: torch.Tensor) -> torch.Tensor | None:
        location = _location(number)
        if self.interleaver is None or location not in self.interleaver.parked:
            self.arrived[number] = (grad, geometry, False)
            return None
        room = _room(geometry, grad, private=True)
        self.arrived[number] = (room, geometry, True)
        self.flowing = number
        try:
            self.interleaver.handle(location, room)
        finally:
            self.flowing = None
        shape, stride, offset, start, _, _ = geometry
        return room.as_strided(shape, stride, offset - start)

    def _room_of(self, number: int) -> torch.Tensor:
        held, geometry, laid = self.arrived[number]
        if not laid:
            held = _room(geometry, held, private=False)
            self.arrived[number] = (held, geometry, True)
        return held

    def read(self, served: torch.Tensor, source: Source) -> torch.Tensor:
        self._refuse(served, source)
        if source.number not in self.arrived:
            self._wait(source)
        self.last = source.label
        view = _strided(self._room_of(source.number), served, source.geometry)
        if self.flowing == source.number:
            return view
        return read_only_view(view, (
            f"{source.label}.grad was read after the backward had moved past {source.label}, so an edit of it would "
            f"reach nothing: assign {source.label}.grad = ... before asking for the gradients the backward computes "
            f"later (those of values the forward computes earlier)"))

    def write(self, served: torch.Tensor, source: Source, new: Any) -> None:
        self._refuse(served, source)
        if source.number in self.arrived and self.flowing != source.number:
            raise GradientOutOfOrder(self._passed(source))
        if source.number not in self.arrived:
            self._wait(source)
        view = _strided(self._room_of(source.number), served, source.geometry)
        if isinstance(new, torch.Tensor) and new.shape != view.shape:
            raise ValueError(f"{source.label}.grad is {list(view.shape)}: assign a tensor of that shape, not "
                             f"{list(new.shape)}")
        view[...] = new
        self.last = source.label

    def _refuse(self, served: torch.Tensor, source: Source) -> None:
        reason = source.refusal(served)
        if reason is not None:
            raise Unavailable(f"{source.label}.grad is unavailable: {reason}")

    def _wait(self, source: Source) -> None:
        try:
            Mediator.value(_location(source.number))
        except OutOfOrderError as error:
            raise GradientOutOfOrder(_never(source)) from error

    def _passed(self, source: Source) -> str:
        before = f" after {self.last}.grad was asked for," if self.last else ""
        return (
            f"{source.label}.grad was assigned{before} but the backward had already moved past {source.label}: "
            f"gradients arrive in the reverse of the forward order, and an edit lands only while its gradient "
            f"flows. Assign {source.label}.grad before asking for the gradients of values the forward computes "
            f"earlier.{_order(source)}"
        )


def _never(source: Source) -> str:
    label, envoy = source.label, source.envoy
    name = label.rpartition(".")[2].partition("[")[0]
    why = envoy.why_read_only(name) if name in getattr(type(envoy), "values", lambda: ())() else None
    unused = f"{': ' + why if why else ''}"
    return (
        f"{label}.grad never arrived: the backward from the metric did not reach {label}, so the metric does not "
        f"depend on it (the forward computes it after what the metric reads, or the model does not go on to use "
        f"it{unused}). Take the metric from a later value (model.logits), or read the gradient of a value the "
        f"metric depends on.{_order(source)}"
    )


def _order(source: Source) -> str:
    model = getattr(source.envoy, "root", None)
    if not hasattr(model, "forward_order"):
        return ""
    return f" The forward computes the standard values in this order: {model.forward_order()}."


def _location(number: int) -> str:
    return f"vlreg.grad.{number}"


def _found(tensor: torch.Tensor) -> Source | None:
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


def _grad_property(interleaver: Any, seen: set, hooks: list) -> property:
    """nnsight's ``Tensor.grad`` for one backward, serving a served value (or a view of one)
    from its source, and any other tensor as nnsight does."""
    plain = _native_property(interleaver, seen, hooks)
    state = _ACTIVE[-1] if _ACTIVE else _Backward()
    state.interleaver = interleaver

    def getter(tensor: torch.Tensor) -> Any:
        source = _found(tensor)
        return plain.fget(tensor) if source is None else state.read(tensor, source)

    def setter(tensor: torch.Tensor, new: Any) -> None:
        source = _found(tensor)
        if source is None:
            plain.fset(tensor, new)
        else:
            state.write(tensor, source, new)

    return property(getter, setter)


class BackwardTracer(_NativeTracer):
    """nnsight's ``with metric.backward():``, serving vlreg's values, refusing a metric with
    no gradient in vlreg's words before the backward runs, and taking served values as
    ``inputs=`` by their sources' gradient edges."""

    def __init__(self, tensor: torch.Tensor, fn: Any, *args: Any, **kwargs: Any) -> None:
        inputs = kwargs.get("inputs")
        if inputs is not None:
            many = isinstance(inputs, (list, tuple))
            edges = [_edge(each) for each in (inputs if many else [inputs])]
            kwargs["inputs"] = edges if many else edges[0]
        super().__init__(tensor, fn, *args, **kwargs)

    def execute(self, code: Any) -> None:
        if not self.tensor.requires_grad:
            reason = _no_metric_gradient()
            if reason is not None:
                raise Unavailable(reason)
        _ACTIVE.append(_Backward())
        try:
            super().execute(code)
        except GradientOutOfOrder:
            raise
        except OutOfOrder as error:  # a forward value read inside the block
            raise OutOfOrder(
                "inside `with metric.backward():` only gradients are served (the forward has run): read the "
                f"forward value before the block and its .grad inside it. {error}"
            ) from error
        finally:
            _ACTIVE.pop()


def _edge(tensor: Any) -> Any:
    source = _found(tensor) if isinstance(tensor, torch.Tensor) else None
    return source.edge if source is not None and source.edge is not None else tensor


def _no_metric_gradient() -> str | None:
    """Why the metric of a vlreg trace carries no gradient, in vlreg's words (``None``
    outside one: nnsight says it)."""
    model = getattr(_worker(), "vlreg_model", None)
    if model is None:
        return None
    if model.run.generating:
        why = "a generate trace runs without gradients (transformers' generate runs under torch.no_grad())"
    elif not torch.is_grad_enabled():
        why = "the trace runs without gradient tracking (under torch.no_grad())"
    else:
        why = "nothing it is computed from requires a gradient (weights frozen with requires_grad_(False))"
    return (f"the metric has no gradient, so a backward from it cannot give one: {why}. Take gradients in a "
            f"model.trace run with gradients on (no torch.no_grad() around it), of a metric computed from its "
            f"values (model.logits)")


def install() -> None:
    """Serve vlreg's values in nnsight's backward (idempotent): every served value passes
    through `mark`, and ``with t.backward():`` builds `BackwardTracer`, whose ``.grad`` is
    `_grad_property`'s. The first copy of this module to load installs the latter; a copy
    loaded again (remote="local") marks values for it."""
    if mark not in serve_hooks:
        serve_hooks.append(mark)
    if native.__dict__.get("_vlreg_installed"):
        return
    native._grad_property = _grad_property
    native.BackwardTracer = BackwardTracer
    native._vlreg_installed = True


install()
