"""Where a value is read: `At`, a value's location as it declares it, and `Site`, that
location on one envoy with the view of it the user reads.

A value is served as a view of what the model holds at a location (a module's input or
output, an operation inside a forward). The view, and its inverse, are the one place a
served value meets the tensor the model computes: an edit of the view is the model's, an
assignment goes back through the inverse, and a gradient of the value is the same view of
that tensor's gradient (a gradient written, the inverse written back).
"""

from __future__ import annotations

from typing import Any, Callable

from attrs import frozen


def model_inputs(envoy: Any) -> str:
    """The location of what the model itself is called with, ``(args, kwargs)``: the
    prompt's ids and mask, read before anything runs (a value's ``at``)."""
    return f"{envoy.root.path}.input"


@frozen
class At:
    """Where a value is read, as its class declares it.

    * ``path``: the location relative to the envoy's path (``"output"``,
      ``"source.attention_interface_1.input"``), or a function of the envoy giving the whole
      location. A function may drill into an operation's source: it runs in the trace, in
      forward order, like the read itself.
    * ``inside``: a function of the envoy giving the envoy whose forward the location is an
      operation in (``lambda layer: layer.parent.parent``, the text model), for a location in
      a forward no standard envoy of this value owns. That forward is source-instrumented when
      the model is built, as it must be: first touching it in a trace, once it is running,
      would serve nothing.
    * ``occurrence``: a function of the envoy giving which call of the location, counted from
      0 in the run, this value is (one call site in a loop over the blocks, run once per
      block: block k's is call k). ``None``: the next one.
    * ``calls``: a function of the envoy giving how many times this run calls the location (a
      projector run once per crop), read off the run's inputs: the value is then served as a
      list, every call's in order from ``occurrence``'s (or the first), and assigned as one.
      ``None`` (or a function that gives ``None`` on this run): it is called once (the first
      call, or ``occurrence``'s, is served).
    """

    path: "str | Callable[[Any], str]" = "output"
    inside: Callable[[Any], Any] | None = None
    occurrence: Callable[[Any], int] | None = None
    calls: Callable[[Any], int | None] | None = None

    def location(self, envoy: Any) -> str:
        """The whole location on ``envoy``."""
        return self.path(envoy) if callable(self.path) else f"{envoy.path}.{self.path}"


@frozen
class Site:
    """A value on one envoy, as the model holds it.

    * ``location``: where the interleaver serves what the model holds (``raw``);
    * ``read``: the view of it the user reads, ``raw -> served`` (a view, so in-place edits
      land);
    * ``write``: the view's inverse, what the model should hold for an assigned value,
      ``(raw, new) -> raw``; ``None``: an assignment is handed over as it is;
    * ``views``: whether what ``read`` gave is a view of ``raw``, ``(served, raw) -> bool``
      (where it is not, the copy is written into the model and served as a view of it);
      ``None``: ``read`` always gives a view.
    """

    location: str
    read: Callable[[Any], Any]
    write: Callable[[Any, Any], Any] | None = None
    views: Callable[[Any, Any], bool] | None = None
