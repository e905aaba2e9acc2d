"""Which call of its module a looped block's envoy reads (`Call`), and the occurrence of a
location nnsight counts for it: the serving side of `vlreg.core.envoys.blocks`' unrolled
``layers``, kept here so that `value` can pin its reads without importing the envoys."""

from __future__ import annotations

from typing import Any

from attrs import frozen


@frozen
class Call:
    """Which call of its module a block's envoy (and each envoy under it) is: pass
    ``pass_index`` of ``passes`` of block module ``module_index``."""

    pass_index: int
    passes: int
    module_index: int

    def occurrence(self, mediator: Any) -> int | None:
        """The occurrence of its location this call reads, counted in the run: the pass
        within the generation step the read is at (``None`` on a block not looped)."""
        if self.passes == 1:
            return None
        return step_of(mediator) * self.passes + self.pass_index


def step_of(mediator: Any) -> int:
    """The generation step a worker reads at: its pinned one (``tracer.iter``), else, once
    nnsight has relaxed the pin after its first read, the step the last pinned read was at."""
    if mediator.iteration is not None:
        mediator.vlreg_step = mediator.iteration
    return getattr(mediator, "vlreg_step", 0)


def drilled_occurrence(mediator: Any, host: Any, locate: Any, call: int) -> int:
    """The occurrence of a location inside ``host``'s forward that call ``call`` of
    ``host`` reads. Inside a function that forward calls (drilled with ``.source``), nnsight
    counts from the call at which it was first drilled in the run, not from the first:
    ``locate`` drills (unpinned: at the next call) and the count is taken from there."""
    iteration, mediator.iteration = mediator.iteration, None
    try:
        location = locate()
    finally:
        mediator.iteration = iteration
    base, nested, _ = location.rpartition(".source.")
    if not nested or base.count(".source.") <= host.path.count(".source."):
        return call  # an operation of host's own forward: counted from its first call
    sourced = mediator.interleaver.sourced
    key = f"vlreg.drilled_at:{base}"  # per run: nnsight clears its record of drilled calls with every run
    if key not in sourced:
        sourced[key] = mediator.occurrence(f"{host.path}.input") - 1
    return call - sourced[key]


def call_of(envoy: Any) -> Call | None:
    """The `Call` an envoy under a block of an unrolled ``layers`` is, else ``None``."""
    return envoy.__dict__.get("_vlreg_call")
