"""Remote conformance: a family's traces read and edit the same under remote execution.

Every check runs a trace here and one of two remote ways, and compares them: nnsight's
``remote="local"`` (the request serialized as it is sent to NDIF, deserialized with the
modules a server lacks hidden), or `vlreg.testing.server.ServerBackend` (the request that
arrives is what runs, as on an NDIF model actor). Which way a check takes is drawn from the
run's seed (`vlreg.testing.sampling`): over runs, both; with ``VLREG_TEST_SAMPLES=all``, both
every run. Blocks name only the
model and plain values, and return what they read by ``.save()`` (a list through
``nnsight.save``): a server sends back the saved names, nothing else of the block.
"""

from __future__ import annotations

from typing import Any

import nnsight
import torch

from ..sampling import repeat, sample
from ..server import ServerBackend
from .helpers import served_on_images, writable_stream

WAYS = ("remote='local'", "an NDIF actor's run of the request")
#: How many of the served values the read check reads in one run, in forward order: the
#: request carries each value back, which at a real checkpoint's widths costs seconds.
READS = 16


def _how(model: Any, way: str) -> dict:
    return {"remote": "local"} if way == WAYS[0] else {"backend": ServerBackend(model)}


def _same(local: Any, remote: Any, what: str, way: str) -> None:
    if isinstance(local, (list, tuple)):
        assert len(local) == len(remote), f"{what} under {way}: {len(remote)} values, not {len(local)}"
        for index, (a, b) in enumerate(zip(local, remote)):
            _same(a, b, f"{what}[{index}]", way)
        return
    if local is None:  # a tuple's empty slot (a block that hands on no selection returns None there)
        assert remote is None, f"{what} under {way}: {remote!r}, not None"
        return
    assert torch.equal(torch.as_tensor(local), torch.as_tensor(remote)), f"{what} differs under {way} ({repeat()})"


class RemoteConformance:
    """Mixed into `TextConformance`, so every family, built in or a third party's, runs it.

    Uses the class's ``order_input`` (an image prompt and one image on a vision family)."""

    def _compare(self, model: Any, run: Any, what: str) -> None:
        local = run({})
        for way in sample(WAYS, 1, f"{type(self).__name__} {what}"):
            _same(local, run(_how(model, way)), what, way)

    def _images(self, model: Any) -> bool:
        vision = model.__dict__.get("vision")
        return vision is not None and vision.no_images() is None

    def test_every_value_read_remotely_is_the_local_value(self, model):
        """Every served standard value (image values, block values, the attention interior
        where this load serves it, the logits), read in forward order in one trace: `READS`
        of them a run, drawn from its seed (over runs, every one)."""
        args, kwargs = self.order_input(model)
        served = served_on_images(model)
        chosen = sample(served, READS, f"{type(self).__name__} remote reads")

        def run(how):
            with model.trace(*args, **kwargs, **how):
                read = nnsight.save([getattr(envoy, name).save() for envoy, name in chosen])
            return read

        self._compare(model, run, "the walk's values")

    def test_several_invokes_and_their_edits_run_remotely_as_locally(self, model):
        """Two invokes of the class's input: the first reads, the second edits the image
        features (its own rows of them) and a block's stream."""
        args, kwargs = self.order_input(model)
        images = self._images(model)

        def run(how):
            with model.trace(**how) as tracer:
                with tracer.invoke(*args, **kwargs):
                    first = model.vision.image_features.save() if images else model.layers[0].input.save()
                    clean = model.logits.save()
                with tracer.invoke(*args, **kwargs):
                    if images:
                        model.vision.image_features[:] = 0
                    getattr(model.layers[0], writable_stream(model)[0])[:] *= 0.5
                    edited = model.logits.save()
            return first, clean, edited

        self._compare(model, run, "the invokes' values")

    def test_generating_with_an_edit_remotely_gives_the_local_tokens(self, model):
        args, kwargs = self.order_input(model)
        images = self._images(model)

        def run(how):
            with model.generate(*args, **kwargs, max_new_tokens=2, min_new_tokens=2, do_sample=False, **how) as tracer:
                if images:
                    model.vision.image_features[:] = 0
                else:
                    model.layers[0].layer_output[:] = 0
                tokens = tracer.result.save()
            return tokens

        self._compare(model, run, "the generated tokens")
