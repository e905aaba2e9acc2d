"""The backward that serves gradients of served values: nnsight's ``with metric.backward():``
with its ``.grad`` reading each value's source as `vlreg.core.serving.gradients` records it.

Inside one, gradients arrive in the reverse of the forward order. One that arrives while
the block waits for another is kept, so reads may come in any order; an assignment must
come while its gradient flows, and later is refused in vlreg's names (`GradientOutOfOrder`),
as is a value the backward never reaches, once it is over. A read in order is the gradient
itself (in-place edits land); a read after the backward moved on refuses edits
(`vlreg.ReadOnly`). A metric with no gradient is refused before the backward runs.
``metric.backward(inputs=[...])`` takes served values by their sources' gradient edges, so
nothing else accumulates a gradient.

nnsight's backward module is patched once, at import (`install`): its ``with t.backward():``
builds `BackwardTracer`, whose ``.grad`` serves vlreg's values this way and every other
tensor as nnsight does.
"""

from __future__ import annotations

from typing import Any

import torch
from nnsight.intervention import backward as native
from nnsight.intervention.interleaver import Mediator, OutOfOrderError

from ..errors import OutOfOrder, Unavailable
from .gradients import ACTIVE, FROZEN, Source, found, lay, strided, worker
from .guards import read_only_view

_NativeTracer = native.__dict__.setdefault("_vlreg_native_tracer", native.BackwardTracer)
_native_property = native.__dict__.setdefault("_vlreg_native_property", native._grad_property)


class GradientOutOfOrder(OutOfOrder):
    """A served value's gradient asked for where the backward cannot give it: assigned
    after it flowed on, or never reached by the backward."""


class _Backward:
    """One backward's gradients of served values: what has arrived (each source's room),
    which source's gradient is flowing now, the last value asked for."""

    def __init__(self) -> None:
        self.interleaver: Any = None
        self.arrived: dict[int, tuple[torch.Tensor, tuple, bool]] = {}
        self.flowing: int | None = None
        self.last: str | None = None  # the last value the block waited for

    def arrive(self, number: int, geometry: tuple, grad: torch.Tensor) -> torch.Tensor | None:
        location = _location(number)
        if self.interleaver is None or location not in self.interleaver.parked:
            self.arrived[number] = (grad, geometry, False)
            return None
        room = lay(geometry, grad, private=True)
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
            held = lay(geometry, held, private=False)
            self.arrived[number] = (held, geometry, True)
        return held

    def read(self, served: torch.Tensor, source: Source) -> torch.Tensor:
        self._refuse(served, source)
        if source.number not in self.arrived:
            self._wait(source)
        view = strided(self._room_of(source.number), served, source.geometry)
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
        view = strided(self._room_of(source.number), served, source.geometry)
        if isinstance(new, torch.Tensor) and new.shape != view.shape:
            raise ValueError(f"{source.label}.grad is {list(view.shape)}: assign a tensor of that shape, not "
                             f"{list(new.shape)}")
        view[...] = new

    def _refuse(self, served: torch.Tensor, source: Source) -> None:
        reason = source.refusal(served)
        if reason is not None:
            raise Unavailable(f"{source.label}.grad is unavailable: {reason}")

    def _wait(self, source: Source) -> None:
        """Park until ``source``'s gradient arrives (the backward runs on meanwhile)."""
        self.last = source.label
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


def _grad_property(interleaver: Any, seen: set, hooks: list) -> property:
    """nnsight's ``Tensor.grad`` for one backward, serving a served value (or a view of one)
    from its source, and any other tensor as nnsight does."""
    plain = _native_property(interleaver, seen, hooks)
    state = ACTIVE[-1] if ACTIVE else _Backward()
    state.interleaver = interleaver

    def getter(tensor: torch.Tensor) -> Any:
        source = found(tensor)
        return plain.fget(tensor) if source is None else state.read(tensor, source)

    def setter(tensor: torch.Tensor, new: Any) -> None:
        source = found(tensor)
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
        if _apart():
            raise Unavailable(
                "gradients are not served where the trace's block runs apart from the model: ndif's sandbox runner "
                "(where NDIF runs a request whose key is not trusted) drives the forward in the model actor's "
                "process, and the backward runs there after it, out of the block's reach (ndif 0.1.2 serves no "
                ".grad in its sandbox). Send the trace with a trusted key, or take gradients where the model is loaded"
            )
        if not self.tensor.requires_grad:
            reason = _no_metric_gradient()
            if reason is not None:
                raise Unavailable(reason)
        ACTIVE.append(_Backward())
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
            ACTIVE.pop()


def _apart() -> bool:
    """Whether this trace's block runs under an interleaver other than nnsight's own: ndif's
    sandbox runner's, which hands each value over a socket from a forward run in another
    process, where no hook of this one reaches the backward."""
    interleaver = getattr(worker(), "interleaver", None)
    return interleaver is not None and not type(interleaver).__module__.startswith("nnsight.")


def _edge(tensor: Any) -> Any:
    source = found(tensor) if isinstance(tensor, torch.Tensor) else None
    return source.edge if source is not None and source.edge is not None else tensor


def _no_metric_gradient() -> str | None:
    """Why the metric of a vlreg trace carries no gradient, in vlreg's words (``None``
    outside one: nnsight says it)."""
    model = getattr(worker(), "vlreg_model", None)
    if model is None:
        return None
    if model.run.generating:
        why = "a generate trace runs without gradients (transformers' generate runs under torch.no_grad())"
    elif not torch.is_grad_enabled():
        why = "the trace runs without gradient tracking (under torch.no_grad())"
    else:
        why = f"nothing it is computed from requires a gradient ({FROZEN})"
    return (f"the metric has no gradient, so a backward from it cannot give one: {why}. Take gradients in a "
            f"model.trace run with gradients on (no torch.no_grad() around it), of a metric computed from its "
            f"values (model.logits)")


def install() -> None:
    """Serve vlreg's values in nnsight's backward (idempotent): ``with t.backward():`` builds
    `BackwardTracer`, whose ``.grad`` is `_grad_property`'s. The first copy of this module
    to load installs it; a copy loaded again (remote="local") leaves it."""
    if native.__dict__.get("_vlreg_installed"):
        return
    native._grad_property = _grad_property
    native.BackwardTracer = BackwardTracer
    native._vlreg_installed = True


install()
