"""`value`: how a standard name is served.

A standard value is an nnsight `eproperty` with two additions:

* its location is computed from the envoy it is read on (``at``), so one class serves
  every family: the logits are wherever this model's ``lm_head`` is, the pattern is
  inside whichever function the attention calls;
* it refuses with `vlreg.Unavailable` when this load cannot serve it, before the model is
  asked for anything.

What the user reads is a view of what the model holds (the tensor itself, an element
of a tuple, a reshape), so in-place edits land. An assignment is mapped back to the
model's layout by the value's ``writes`` function, which is handed the raw value at
the location and the new one.
"""

from __future__ import annotations

from typing import Any, Callable

from nnsight.intervention.eproperty import eproperty
from nnsight.intervention.interleaver import Mediator


class value(eproperty):
    """A standard value on a vlreg envoy.

    Args:
        at: The location, relative to the envoy's path (``"output"``,
            ``"source.attention_interface_1.input"``), or a function of the envoy giving
            the whole location. A function may drill into an operation's source: it runs
            in the trace, in forward order, like the read itself.
        unavailable: A predicate on the envoy: ``None`` when the value can be served,
            else the reason, one sentence that says what would help.
        description: Shown beside the value in the envoy's repr.
    """

    def __init__(
        self,
        at: "str | Callable[[Any], str]" = "output",
        *,
        unavailable: Callable[[Any], "str | None"] | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__(key=at if isinstance(at, str) else None, description=description)
        self.at = at
        self.unavailable = unavailable

    def __call__(self, preprocess: Callable) -> "value":
        key = self.key
        super().__call__(preprocess)
        self.key = key  # the location is ``at``, never the stub's name
        return self

    def __set_name__(self, owner: type, name: str) -> None:
        # A value made by a factory has a lambda for its stub; the class attribute
        # is its name, which is what `support` rows and `Unavailable` messages use.
        self.name = name

    def writes(self, rebuild: Callable[[Any, Any, Any], Any]) -> "value":
        """Map an assigned value back into the model's layout.

        ``rebuild(envoy, raw, new)`` gets the value as the model holds it at the
        location and the assigned one, and returns what the model should hold.
        """

        def postprocess(envoy: Any, new: Any) -> Any:
            return rebuild(envoy, Mediator.value(self._location(envoy)), new)

        self._postprocess = postprocess
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
        return super().__get__(obj, owner)

    def __set__(self, obj: Any, new: Any) -> None:
        obj.refuse(self.name)
        super().__set__(obj, new)


def first(raw: Any) -> Any:
    """The first element of a module's tuple output, or the output itself."""
    return raw[0] if isinstance(raw, tuple) else raw


def with_first(envoy: Any, raw: Any, new: Any) -> Any:
    """``raw`` with its first element (or itself, if not a tuple) replaced by ``new``."""
    return (new, *raw[1:]) if isinstance(raw, tuple) else new


def argument(index: int, at: "str | Callable[[Any], str]", **options: Any) -> value:
    """A value that is the ``index``-th positional argument of the call at ``at``
    (a ``.input`` location, served as ``(args, kwargs)``)."""

    def rebuild(envoy: Any, raw: Any, new: Any) -> Any:
        args, kwargs = raw
        return (*args[:index], new, *args[index + 1 :]), kwargs

    return value(at, **options)(lambda envoy, raw: raw[0][index]).writes(rebuild)


def returned(at: "str | Callable[[Any], str]" = "output", **options: Any) -> value:
    """A value that is a module's or call's output, or its first element if a tuple."""
    return value(at, **options)(lambda envoy, raw: first(raw)).writes(with_first)

