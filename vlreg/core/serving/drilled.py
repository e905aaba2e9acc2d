"""Calls inside a forward whose own operations a value is read at: located by drilling in the
trace (`inside`), or, for an entry read inside one (`Scatter.assigned`: Kosmos-2's
``forward_embedding``, which its text model's forward calls), instrumented as each run starts.

nnsight instruments such a nested call only when a worker first asks for it, and it can ask
only before the call runs: a value read inside it after another value of the same call (the
token embeddings, then the features written over them) would ask too late. So the model's
function is wrapped to register the instrumented call before it runs, as nnsight's own drill
would (`nnsight.intervention.source.SourceEnvoy.source`): the values inside are then
reachable in any order the forward computes them, and a run that reads none of them runs the
same operations.
"""

from __future__ import annotations

from typing import Any, Callable

from nnsight.intervention.source import instrument, make_op


def inside(call: Any, operation: str) -> str:
    """The location of ``operation`` (``"nn_functional_dropout_0.output"``) inside the function
    ``call`` (an operation of a ``.source``) calls, which is known only when the call is made.

    ``call.source`` drills into it, in the trace, as nnsight does; the location is then named
    from the call's own path, never from the drilled object's ``prefix``: ndif's sandbox
    runner drills with a stand-in for nnsight's ``Source`` that keeps its prefix private, and
    a value located through it raised ``AttributeError`` there (docs/remote.md)."""
    call.source
    return f"{call.path}.source.{operation}"


def drilled(model: Any, fn: Any) -> Any:
    """``fn`` (the function a run calls on ``model``, or its name) registering, before it
    runs, the instrumented copy of each call the family's entry reads inside
    (`Entry.nested`). Both are resolved as the run starts, on the module then live (a lazy
    build has dispatched its weights by then)."""
    entry = model.family.entry
    if entry is None or not entry.nested(model):
        return fn
    interleaver = model.interleaver

    def located(path: str) -> Callable[[], tuple]:
        return lambda: (interleaver, path) if interleaver.interleaving else (None, None)

    def run(*args: Any, **kwargs: Any) -> Any:
        for path, function in entry.nested(model):
            interleaver.sourced[path] = instrument(function, make_op(located(path)))
        return (getattr(model._module, fn) if isinstance(fn, str) else fn)(*args, **kwargs)

    run.__name__ = fn if isinstance(fn, str) else getattr(fn, "__name__", "run")
    return run
