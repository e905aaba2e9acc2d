"""`PerCall`: a module the forward calls several times, every call served in order.

nnsight serves a module's ``output`` at its first call. A module that one forward calls
more than once (LFM2-VL's projector, run once per crop: tiles and a thumbnail) would then
answer with the first crop's output alone, and nothing would say so. A plugin maps such a
module's class onto a subclass of `PerCall` and says how many calls a run makes, from the
inputs the model is called with (`PerCall.calls`); ``input`` and ``output`` are then lists,
one entry per call in the order the forward makes them (reading one waits for the last
call). An assignment takes such a list and writes each entry as its call returns, so it
is made before the calls are read in that trace (take their shapes from an earlier one). The conformance suite counts every standard module's calls in a forward and fails
a family whose module is called more than once without being declared so.
"""

from __future__ import annotations

from typing import Any

from nnsight.intervention.util import first_input, replace_first_input

from ..serving.sites import At
from ..serving.values import value
from .standard import Standard


def _calls(envoy: "PerCall") -> int:
    return envoy.calls(envoy.run.inputs)


class PerCall(Standard):
    """A module called several times in one forward: ``input`` and ``output`` per call.

    A family subclasses it, implements `calls`, and maps the module's class onto the
    subclass (`vlreg_envoys`)."""

    order = ("input", "output")

    @value(At("input", calls=_calls))
    def input(self, raw: Any) -> Any:
        """Each call's first input, in call order."""
        return first_input(*raw)

    input.writes(lambda envoy, raw, new: replace_first_input(*raw, new))

    @value(At("output", calls=_calls))
    def output(self, raw: Any) -> Any:
        """Each call's output, in call order."""
        return raw

    def calls(self, inputs: dict) -> int:
        """How many times a forward on ``inputs`` (the model's keyword inputs: the
        processor's encoding) calls this module."""
        raise NotImplementedError(f"{type(self).__name__} must say how many times the forward calls it")
