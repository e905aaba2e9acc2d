"""`value`: how a standard name is served.

A standard value is an nnsight `eproperty` with three additions:

* its location is computed from the envoy it is read on (``at``), so one class serves
  every family: the logits are wherever this model's ``lm_head`` is, the pattern is
  inside whichever function the attention calls;
* it refuses with `vlreg.Unavailable` when this load (or this trace's input) cannot
  serve it, before the model is asked for anything;
* it refuses writes with `vlreg.ReadOnly` where a write would not reach the model (the
  image-token mask is derived from the prompt; a tower output the projector does not
  read), both assignments and in-place edits of the served tensor.

What the user reads is a view of what the model holds (the tensor itself, an element
of a tuple, a reshape), so in-place edits land. An assignment is mapped back to the
model's layout by the value's ``writes`` function, which is handed the raw value at
the location and the new one.

A read the forward has already passed raises `vlreg.OutOfOrder`, naming the value, the
one read before it and the order the forward computes them in.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch
from greenlet import getcurrent
from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator, OutOfOrderError

from ..errors import OutOfOrder, ReadOnly
from .batching import select, splice

Predicate = Callable[[Any], "str | None"]

#: What every served value passes through on its way to the user, ``hook(envoy, label,
#: served, raw) -> served`` (``raw``: what the location held, which the preprocess viewed):
#: `vlreg.core.serving.gradients` marks there where ``.grad`` finds the tensor the model goes
#: on to use (the one place a served value meets gradients).
serve_hooks: list[Callable[[Any, str, Any, Any], Any]] = []


class value(eproperty):
    """A standard value on a vlreg envoy.

    Args:
        at: The location, relative to the envoy's path (``"output"``,
            ``"source.attention_interface_1.input"``), or a function of the envoy giving
            the whole location. A function may drill into an operation's source: it runs
            in the trace, in forward order, like the read itself.
        unavailable: A predicate on the envoy: ``None`` when the value can be served,
            else the reason, one sentence that says what would help.
        read_only: A predicate on the envoy: ``None`` when a write reaches the model,
            else why it would not and what to edit instead.
        needs_images: Whether the value exists only when the trace's input carries
            images. ``None``: on a tower envoy yes (all the tower computes, and the
            scatter), elsewhere no; the image-token mask says no (it is all False on a
            text prompt); a text value only images make (DeepStack's) says yes.
        inside: A function of the envoy giving the envoy whose forward the location is
            an operation in (``lambda layer: layer.parent.parent``, the text model), for a
            location in a forward no standard envoy of this value owns. That forward is
            source-instrumented when the model is built, as it must be: first touching it
            in a trace, once it is running, would serve nothing.
        occurrence: A function of the envoy giving which call of the location, counted
            from 0 in the run, this value is (one call site in a loop over the blocks, run
            once per block: block k's is call k). ``None``: the next one.
        calls: A function of the envoy giving how many times this run calls the location
            (a projector run once per crop), read off the run's inputs: the value is then
            served as a list, every call's in order, and assigned as one. ``None``: the
            location is called once (the first call is served).
        layout: How the value holds a batch of several invokes (see
            `vlreg.core.serving.batching`): ``"batch"``, ``"tokens"``, ``"image_tokens"``,
            ``"rows"``, ``"streams"`` or ``"tower"``, or a function of the envoy giving one. ``None``: ``"tower"`` on a
            tower envoy, else ``"batch"``.
        description: One line shown beside the value in the envoy's repr (default: the
            first line of the preprocess's docstring).
    """

    def __init__(
        self,
        at: "str | Callable[[Any], str]" = "output",
        *,
        unavailable: Predicate | None = None,
        read_only: Predicate | None = None,
        needs_images: bool | None = None,
        inside: Callable[[Any], Any] | None = None,
        occurrence: Callable[[Any], int] | None = None,
        calls: Callable[[Any], int] | None = None,
        layout: "str | Callable[[Any], str] | None" = None,
        description: str | None = None,
    ) -> None:
        super().__init__(key=at if isinstance(at, str) else None, description=description)
        self.at = at
        self.unavailable = unavailable
        self.read_only = read_only
        self.needs_images = needs_images
        self.inside = inside
        self.occurrence = occurrence
        self.calls = calls
        self.layout = layout
        self._views: Callable[[Any, Any, Any], bool] | None = None
        self._raw: Any = None  # what the preprocess last viewed, for serve_hooks

    def __call__(self, preprocess: Callable) -> "value":
        key = self.key
        super().__call__(_keeping_raw(self, preprocess))
        self.key = key  # the location is ``at``, never the stub's name
        if self.description is None and preprocess.__doc__:
            self.description = preprocess.__doc__.strip().splitlines()[0]
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        # A value made by a factory has a lambda for its stub; the class attribute
        # is its name, which is what `support` rows and `Unavailable` messages use.
        self.name = name
        self.owner = owner
        # A subclass that serves a value from elsewhere serves the same value.
        for base in owner.__mro__[1:]:
            inherited = base.__dict__.get(name)
            if self.description is None and isinstance(inherited, value):
                self.description = inherited.description

    def __reduce__(self) -> tuple:
        # By reference: the class it is on, and its name there (a property pickles not).
        from .reference import class_reference, descriptor_of

        return descriptor_of, (class_reference(self.owner), self.name)

    def writes(self, rebuild: Callable[[Any, Any, Any], Any]) -> "value":
        """Map an assigned value back into the model's layout.

        ``rebuild(envoy, raw, new)`` gets the value as the model holds it at the
        location and the assigned one, and returns what the model should hold.
        """

        def postprocess(envoy: Any, new: Any) -> Any:
            return rebuild(envoy, Mediator.value(self._location(envoy)), new)

        self._postprocess = postprocess
        self._rebuild = rebuild
        return self

    def viewable(self, views: Callable[[Any, Any, Any], bool]) -> "value":
        """Serve a view of what the model holds even where the preprocess must copy.

        A preprocess that reshapes can be handed a tensor not laid out for the reshape (a
        pooling's transposed output, flattened): torch then copies, and an edit of the copy
        would reach nothing. ``views(envoy, served, raw)`` says whether ``served`` is a view
        of ``raw``; where it is not, the copy is written into the model first (through the
        value's `writes` function, in the model's layout, at once: in a batch of invokes
        too, whole) and the value is read again, a view of it now, so in-place edits land
        as on any view. Call after `writes`; a viewable value takes no `transform`."""
        self._views = views
        return self

    def _location(self, obj: Any) -> str:
        if callable(self.at):
            return self.at(obj)
        return f"{obj.path}.{self.at}"

    def location(self, envoy: Any) -> str:
        """Where this value is read on ``envoy`` (outside a trace, for a value whose
        ``at`` is a path; a drilled location exists only while the trace runs)."""
        return self._location(envoy)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        obj.refuse(self.name)
        label = obj.label(self.name)
        if self.calls is not None:
            return [self._one(obj, owner, label, call) for call in range(self.calls(obj))]
        return self._one(obj, owner, label, self._pin(obj))

    def _one(self, obj: Any, owner: Any, label: str, occurrence: int | None) -> Any:
        with _in_order(obj, label, occurrence), _served_whole(obj, label, self.layout_on(obj)) as group:
            served = super().__get__(obj, owner) if self._views is None else self._as_view(obj)
        if group is not None:
            served = select(self.layout_on(obj), served, group, obj.run)
        reason = obj.why_read_only(self.name)
        if reason is not None and isinstance(served, torch.Tensor):
            served = read_only_view(served, f"{label} cannot be written: {reason}")
        raw, self._raw = self._raw, None
        for hook in serve_hooks:  # gradients: see serve_hooks
            served = hook(obj, label, served, raw)
        return served

    def _as_view(self, obj: Any) -> Any:
        """The served value as a view of what the model holds (`viewable`)."""
        location = self._location(obj)
        raw = Mediator.value(location)
        served = self._preprocess(obj, raw)
        if self._views(obj, served, raw):
            return served
        Mediator.swap(location, self._rebuild(obj, raw, served))
        return self._preprocess(obj, Mediator.value(location))

    def __set__(self, obj: Any, new: Any) -> None:
        obj.refuse(self.name)
        reason = obj.why_read_only(self.name)
        if reason is not None:
            raise ReadOnly(f"{obj.label(self.name)} cannot be written: {reason}")
        label, layout = obj.label(self.name), self.layout_on(obj)
        if self.calls is not None:
            calls = self.calls(obj)
            if not isinstance(new, (list, tuple)) or len(new) != calls:
                raise ValueError(f"{label} is served per call ({calls} in this run): assign a list of {calls}")
            for call, each in enumerate(new):
                with _in_order(obj, label, call):
                    super().__set__(obj, each)
            return
        with _in_order(obj, label, self._pin(obj)), _served_whole(obj, label, layout) as group:
            if group is not None:
                new = splice(layout, eproperty.__get__(self, obj, type(obj)), group, obj.run, new)
            super().__set__(obj, new)

    def _pin(self, obj: Any) -> int | None:
        return None if self.occurrence is None else self.occurrence(obj)

    def layout_on(self, obj: Any) -> str:
        """The value's batch layout on ``obj`` (see ``layout``)."""
        layout = self.layout(obj) if callable(self.layout) else self.layout
        return layout or ("tower" if obj._tower is not None else "batch")


def _keeping_raw(served: value, preprocess: Callable) -> Callable:
    """``preprocess``, keeping on ``served`` the raw value it views, for `serve_hooks`."""

    @functools.wraps(preprocess)
    def view(envoy: Any, raw: Any) -> Any:
        served._raw = raw
        return preprocess(envoy, raw)

    return view


@contextlib.contextmanager
def _in_order(envoy: Any, label: str, occurrence: int | None = None) -> Iterator[None]:
    """Around a read or write in a trace: pin it to its occurrence if it has one,
    remember it as the worker's last one, and turn nnsight's `OutOfOrderError` for it
    into `OutOfOrder` in vlreg's names."""
    mediator = Mediator.current(label)
    iteration = mediator.iteration
    if occurrence is not None:
        mediator.iteration = occurrence
    try:
        yield
    except OutOfOrderError as error:
        # Under tracer.iter a location never reached ends a loop that outran the run,
        # which nnsight turns into a warning; only a plain (or pinned) read is out of order.
        if occurrence is None and iteration != 0:
            raise
        previous = getattr(mediator, "vlreg_last_read", None)
        raise OutOfOrder(_out_of_order(envoy.root, label, previous)) from error
    finally:
        mediator.iteration = iteration
    mediator.vlreg_last_read = label


@contextlib.contextmanager
def _served_whole(envoy: Any, label: str, layout: str) -> Iterator[Any]:
    """In a trace batching several invokes, serve a value not laid out along the batch
    whole (nnsight would narrow any tensor whose leading axis happens to be the batch's
    size), and yield the invoke's rows for `select` to cut it; else yield ``None``."""
    mediator = Mediator.current(label)
    group = mediator.batch_group
    batcher = getattr(mediator.interleaver, "batcher", None)
    if layout == "batch" or group is None or batcher is None or not batcher.batching:
        yield None
        return
    mediator.batch_group = None
    try:
        yield group
    finally:
        mediator.batch_group = group


def _out_of_order(model: Any, label: str, previous: str | None) -> str:
    after, than = (f" after {previous}", f" than {previous}") if previous else ("", "")
    return (
        f"{label} was read{after}, but the forward computes it earlier{than}, so it had already "
        f"passed it (or this input never makes it). The forward computes the standard values in "
        f"this order: {model.forward_order()}. Read {label} before {previous or 'the values after it'}, "
        f"or in a trace of its own."
    )


def _tracing() -> bool:
    """Whether this code runs as a trace's intervention (in an nnsight worker)."""
    return getattr(getcurrent(), "mediator", None) is not None


#: Tensor methods whose name ends in "_" that change no values.
_NOT_EDITS = frozenset({"requires_grad_", "retain_grad", "share_memory_", "pin_memory", "detach_"})
_AUGMENTED = frozenset(
    f"__i{op}__"
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift", "matmul")
)


def _edits(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``func(*args, **kwargs)`` writes into ``args[0]`` (or into ``out=``)."""
    if isinstance(kwargs.get("out"), ReadOnlyTensor):
        return True
    if not args or not isinstance(args[0], ReadOnlyTensor):
        return False
    name = getattr(func, "__name__", "")
    if name == "__setitem__" or name in _AUGMENTED:
        return True
    return name.endswith("_") and not name.startswith("_") and name not in _NOT_EDITS


class ReadOnlyTensor(torch.Tensor):
    """A served value whose writes would not reach the model.

    It shares the storage of what the model holds (no copy). Inside a trace an in-place
    edit of it raises `ReadOnly` with the value's reason; everything else, and anything
    after the trace, behaves as the plain tensor (results are plain tensors).
    """

    _vlreg_reason = "this value cannot be written"

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if _edits(func, args, kwargs) and _tracing():
            target = kwargs.get("out") if isinstance(kwargs.get("out"), ReadOnlyTensor) else args[0]
            raise ReadOnly(target._vlreg_reason)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return repr(self.as_subclass(torch.Tensor))


def read_only_view(tensor: torch.Tensor, reason: str) -> ReadOnlyTensor:
    """``tensor`` as a `ReadOnlyTensor` (same storage) that refuses edits with ``reason``."""
    view = tensor.as_subclass(ReadOnlyTensor)
    view._vlreg_reason = reason
    return view


def first(raw: Any) -> Any:
    """The first element of a module's tuple output, or the output itself."""
    return raw[0] if isinstance(raw, tuple) else raw


def with_first(envoy: Any, raw: Any, new: Any) -> Any:
    """``raw`` with its first element (or itself, if not a tuple) replaced by ``new``."""
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


def argument(index: "int | str", at: "str | Callable[[Any], str]", *, copy: bool = False, **options: Any) -> value:
    """A value that is the ``index``-th positional argument (or, for a name, the keyword
    argument) of the call at ``at`` (a ``.input`` location, served as ``(args, kwargs)``).
    With ``copy``, served as a copy written back (see `copied`)."""

    def read(envoy: Any, raw: Any) -> Any:
        args, kwargs = raw
        found = kwargs[index] if isinstance(index, str) else args[index]
        return found.clone() if copy else found

    def rebuild(envoy: Any, raw: Any, new: Any) -> Any:
        args, kwargs = raw
        if isinstance(index, str):
            return args, {**kwargs, index: new}
        return (*args[:index], new, *args[index + 1 :]), kwargs

    served = value(at, **options)(read).writes(rebuild)
    return served.transform(lambda envoy, view, raw: rebuild(envoy, raw, view)) if copy else served


def returned(at: "str | Callable[[Any], str]" = "output", *, element: int = 0, **options: Any) -> value:
    """A value that is a module's or call's output, or its ``element``-th if a tuple."""

    def read(envoy: Any, raw: Any) -> Any:
        return raw[element] if isinstance(raw, tuple) else raw

    def rebuild(envoy: Any, raw: Any, new: Any) -> Any:
        return (*raw[:element], new, *raw[element + 1 :]) if isinstance(raw, tuple) else new

    return value(at, **options)(read).writes(rebuild)


def copied(at: "str | Callable[[Any], str]" = "output", **options: Any) -> value:
    """`returned`, for a tensor torch forbids editing in place (one of several views a
    function such as ``unbind`` returns): served as a copy that is written back when the
    trace moves on, so in-place edits land all the same."""
    served = value(at, **options)(lambda envoy, raw: first(raw).clone()).writes(with_first)
    return served.transform(lambda envoy, view, raw: with_first(envoy, raw, view))
