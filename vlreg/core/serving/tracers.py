"""The tracers a `StandardizedTransformer` runs its traces and scans with: nnsight's, each
holding the model's lock while it runs."""

from __future__ import annotations

from typing import Any

from nnsight.intervention.tracer import InterleavingTracer, ScanningTracer


class _Serialized:
    """A tracer that holds its model's lock from collecting its invokes to the end of
    the run: nnsight keeps one interleaver per model, so two traces running at once on
    one model (two threads) would serve each other's values. They take turns instead."""

    def execute(self, code: Any) -> None:
        with self.envoy.root._lock:
            super().execute(code)


class Tracer(_Serialized, InterleavingTracer):
    pass


class Scanner(_Serialized, ScanningTracer):
    pass
