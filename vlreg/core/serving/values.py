"""`value`: how a standard name is served.

A standard value is an nnsight `eproperty` with three additions:

* its location is computed from the envoy it is read on (``at``, an `At`), so one class
  serves every family: the logits are wherever this model's ``lm_head`` is, the pattern is
  inside whichever function the attention calls;
* it refuses with `vlreg.Unavailable` when this load (or this trace's input) cannot
  serve it, before the model is asked for anything;
* it refuses writes with `vlreg.ReadOnly` where a write would not reach the model (the
  image-token mask is derived from the prompt; a tower output the projector does not
  read), both assignments and in-place edits of the served tensor.

Why it refuses is not the value's to say: the envoy asks the refusal table
(`vlreg.core.serving.refusals`) before every read and write.

What the user reads is a view of what the model holds (the tensor itself, an element
of a tuple, a reshape), so in-place edits land. An assignment is mapped back to the
model's layout by the value's ``writes`` function, which is handed the raw value at
the location and the new one. The location, the view and its inverse on one envoy are the
value's `Site` (`value.site`). Inside ``with metric.backward():`` a value's ``.grad`` is the
same view of the gradient of what the model holds there (`vlreg.core.serving.gradients`).

A read the forward has already passed raises `vlreg.OutOfOrder`, naming the value, the
one read before it and the order the forward computes them in.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator, OutOfOrderError

from ..errors import OutOfOrder, ReadOnly
from .batching import select, splice
from .gradients import mark
from .guards import read_only_view
from .calls import drilled_occurrence, step_of
from .sites import At, Site, model_inputs

class value(eproperty):
    """A standard value on a vlreg envoy.

    Three concerns, each said once: where it is read (``at``, an `At`: the location, the
    forward it is inside, which call), how it holds a batch of several invokes (``layout``),
    and the view the user reads of what the model holds there (the decorated function, with
    its inverse, `writes`). Why it is not served is the refusal table's
    (`vlreg.core.serving.refusals`), asked by the envoy before every read and write.

    Args:
        at: Where it is read: an `At`, or its ``path`` alone (``"output"``, a function of
            the envoy giving the whole location).
        layout: How the value holds a batch of several invokes (see
            `vlreg.core.serving.batching`): ``"batch"``, ``"tokens"``, ``"image_tokens"``,
            ``"rows"``, ``"streams"``, ``"tower"`` or ``"whole"``, or a function of the envoy giving one.
            ``None``: ``"tower"`` on a tower envoy, else ``"batch"``.
        description: One line shown beside the value in the envoy's repr (default: the
            first line of the view's docstring).
    """

    def __init__(
        self,
        at: "At | str | Callable[[Any], str]" = "output",
        *,
        layout: "str | Callable[[Any], str] | None" = None,
        description: str | None = None,
    ) -> None:
        self.at = at if isinstance(at, At) else At(at)
        super().__init__(key=self.at.path if isinstance(self.at.path, str) else None, description=description)
        self.layout = layout
        self._rebuild: Callable[[Any, Any, Any], Any] | None = None
        self._views: Callable[[Any, Any, Any], bool] | None = None

    def __call__(self, preprocess: Callable) -> "value":
        key = self.key
        super().__call__(preprocess)
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
        """Map an assigned value back into the model's layout: the view's inverse.

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

    def site(self, envoy: Any) -> Site:
        """This value on ``envoy`` as the model holds it: the location of what the model
        computes, the view of it the user reads, and that view's inverse (`Site`). The one
        place a served value meets the tensor the model computes: every read and write goes
        through it (outside a trace, for a value whose ``at`` is a path; a drilled location
        exists only while the trace runs)."""

        def bound(function: Callable | None) -> Callable | None:
            return None if function is None else (lambda *args: function(envoy, *args))

        return Site(self.at.location(envoy), bound(self._preprocess), bound(self._rebuild), bound(self._views))

    def _location(self, obj: Any) -> str:
        return self.at.location(obj)

    @property
    def reads_model_inputs(self) -> bool:
        """Whether the value is read off what the model itself is called with (`model_inputs`)."""
        return self.at.path is model_inputs

    def location(self, envoy: Any) -> str:
        """Where this value is read on ``envoy`` (`site`'s location)."""
        return self._location(envoy)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        obj.refuse(self.name)
        label = obj.label(self.name)
        calls = self._calls(obj)
        if calls is not None:
            first = self._pin(obj) or 0
            return [self._one(obj, owner, label, first + call) for call in range(calls)]
        return self._one(obj, owner, label, self._pin(obj))

    def _one(self, obj: Any, owner: Any, label: str, occurrence: int | None) -> Any:
        with _in_order(obj, label, occurrence), _served_whole(obj, label, self.layout_on(obj)) as group:
            served, raw = (super().__get__(obj, owner), None) if self._transform is not None else self._read(obj)
        if group is not None:
            served = select(self.layout_on(obj), served, group, obj.run)
        reason = obj.why_read_only(self.name)
        if reason is not None and isinstance(served, torch.Tensor):
            served = read_only_view(served, f"{label} cannot be written: {reason}")
        return mark(obj, label, served, raw)

    def _read(self, obj: Any) -> tuple[Any, Any]:
        """The served value through its `Site`, and what the model held there (``raw``,
        which `mark` finds its gradient's source in). A value the preprocess had to copy
        is written into the model and read again, a view of it now (`viewable`). A value
        with a ``transform`` (`copied`) is nnsight's to serve: its copy is what the model
        goes on to use, its own source."""
        site = self.site(obj)
        raw = Mediator.value(site.location)
        served = site.read(raw)
        if site.views is None or site.views(served, raw):
            return served, raw
        Mediator.swap(site.location, site.write(raw, served))
        raw = Mediator.value(site.location)
        return site.read(raw), raw

    def __set__(self, obj: Any, new: Any) -> None:
        obj.refuse(self.name)
        reason = obj.why_read_only(self.name)
        if reason is not None:
            raise ReadOnly(f"{obj.label(self.name)} cannot be written: {reason}")
        label, layout = obj.label(self.name), self.layout_on(obj)
        calls = self._calls(obj)
        if calls is not None:
            if not isinstance(new, (list, tuple)) or len(new) != calls:
                raise ValueError(f"{label} is served per call ({calls} in this run): assign a list of {calls}")
            first = self._pin(obj) or 0
            for call, each in enumerate(new):
                with _in_order(obj, label, first + call):
                    super().__set__(obj, each)
            return
        with _in_order(obj, label, self._pin(obj)), _served_whole(obj, label, layout) as group:
            if group is not None:
                new = splice(layout, eproperty.__get__(self, obj, type(obj)), group, obj.run, new)
            super().__set__(obj, new)

    def _calls(self, obj: Any) -> int | None:
        """How many calls of the location this run serves as a list, or ``None``: one, served alone."""
        return None if self.at.calls is None else self.at.calls(obj)

    def _pin(self, obj: Any) -> int | None:
        """The occurrence of the location this read is pinned to: the value's own
        (``At.occurrence``), else, on a looped block's call, that call's
        (`vlreg.core.serving.calls.Call`), else none (the next)."""
        if self.at.occurrence is not None:
            return self.at.occurrence(obj)
        call = obj.__dict__.get("_vlreg_call")
        if call is None:
            return None
        mediator = Mediator.current(obj.label(self.name))
        pinned = call.occurrence(mediator)
        if pinned is None or not callable(self.at.path):
            return pinned  # a module's input or output: counted from its first call
        host = obj if self.at.inside is None else self.at.inside(obj)
        return drilled_occurrence(mediator, host, lambda: self._location(obj), pinned)

    def layout_on(self, obj: Any) -> str:
        """The value's batch layout on ``obj`` (see ``layout``)."""
        layout = self.layout(obj) if callable(self.layout) else self.layout
        return layout or ("tower" if obj.place.tower is not None else "batch")


class built(value):
    """A value whose `Site` a function of the envoy builds whole (the location, the view and
    its inverse): ``vision.image_features``, whose site the family's entry builds
    (`Entry.features`). ``inside``, ``occurrence`` and ``calls`` are as `At`'s."""

    def __init__(
        self,
        site: Callable[[Any], Site],
        *,
        inside: Callable[[Any], Any] | None = None,
        occurrence: Callable[[Any], int] | None = None,
        calls: Callable[[Any], int | None] | None = None,
        layout: "str | Callable[[Any], str] | None" = None,
        description: str | None = None,
    ) -> None:
        super().__init__(At(lambda envoy: site(envoy).location, inside=inside, occurrence=occurrence, calls=calls),
                         layout=layout, description=description)
        self.site = site  # type: ignore[method-assign]
        self(lambda envoy, raw: site(envoy).read(raw))
        self.writes(lambda envoy, raw, new: site(envoy).write(raw, new))
        self.viewable(lambda envoy, served, raw: True)  # served as a view as the site says (`Site.views`)


@contextlib.contextmanager
def _in_order(envoy: Any, label: str, occurrence: int | None = None) -> Iterator[None]:
    """Around a read or write in a trace: pin it to its occurrence if it has one,
    remember it as the worker's last one, and turn nnsight's `OutOfOrderError` for it
    into `OutOfOrder` in vlreg's names."""
    mediator = Mediator.current(label)
    iteration = mediator.iteration
    step_of(mediator)  # remembered for a looped block's calls read after nnsight relaxes the pin
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


def first(raw: Any) -> Any:
    """The first element of a module's tuple output, or the output itself."""
    return raw[0] if isinstance(raw, tuple) else raw


def with_first(envoy: Any, raw: Any, new: Any) -> Any:
    """``raw`` with its first element (or itself, if not a tuple) replaced by ``new``."""
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


def argument(index: "int | str", at: "At | str | Callable[[Any], str]", *, copy: bool = False, **options: Any) -> value:
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


def returned(at: "At | str | Callable[[Any], str]" = "output", *, element: int = 0, **options: Any) -> value:
    """A value that is a module's or call's output, or its ``element``-th if a tuple."""

    def read(envoy: Any, raw: Any) -> Any:
        return raw[element] if isinstance(raw, tuple) else raw

    def rebuild(envoy: Any, raw: Any, new: Any) -> Any:
        return (*raw[:element], new, *raw[element + 1 :]) if isinstance(raw, tuple) else new

    return value(at, **options)(read).writes(rebuild)


def copied(at: "At | str | Callable[[Any], str]" = "output", **options: Any) -> value:
    """`returned`, for a tensor torch forbids editing in place (one of several views a
    function such as ``unbind`` returns): served as a copy that is written back when the
    trace moves on, so in-place edits land all the same."""
    served = value(at, **options)(lambda envoy, raw: first(raw).clone()).writes(with_first)
    return served.transform(lambda envoy, view, raw: with_first(envoy, raw, view))
