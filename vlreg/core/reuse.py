"""Running the tower once for many traces of the same images.

A sweep (occlusion, patching token by token, ablations) runs the same prompt and images
many times, often as copies in one batch, and the tower recomputes the same features
every time: on Qwen2-VL-2B's widths it is about 70 % of a forward. `TowerCache` runs the
tower once and replays its output: inside a trace, `TowerCache.replay` skips the tower
(its forward does not run) and hands the wrapper the cached output, repeated for each
copy of the images, so everything after the tower (projector, scatter, text model) runs
as it would.

The replayed output is the tower's whole output object (its last hidden state, the
merger's output on the Qwen towers, the hidden states a projector reads, DeepStack's
taps), every tensor repeated along the tower's batch axis (`Vision.batch_axis`): the
leading axis (images, crops, or a packed row of patches), or the patches' axis of a
tower that packs every image into one row behind a leading axis of 1 (Pixtral's). Tower values are not computed in a
trace that replays: reading one is refused with the reason.
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import LocalOnly, Unavailable


class TowerCache:
    """The tower's output for one prompt's images, to replay in traces of them.

    Made by ``model.vision.cache(prompt, images)``; ``image_tokens`` is how many image
    tokens the images make, which a trace replaying it must hold ``copies`` times.
    """

    def __init__(self, model: Any, output: Any, image_tokens: int) -> None:
        self.model, self.output, self.image_tokens = model, output, image_tokens

    def replay(self, copies: int = 1) -> None:
        """Inside a trace whose images are ``copies`` copies of the cached ones, in order:
        skip the tower and hand on its cached output, repeated ``copies`` times."""
        model = self.model
        run = model._run
        if run.image_tokens is None or int(run.image_tokens.sum()) != copies * self.image_tokens:
            held = "no image tokens" if run.image_tokens is None else f"{int(run.image_tokens.sum())} image tokens"
            raise ValueError(
                f"this trace holds {held}, not {copies} copies of the cached images' {self.image_tokens}: "
                f"replay a cache only in a trace of the images it was made from"
            )
        model._replaying = True
        model.vision.skip(_repeat(self.output, copies, model.vision.batch_axis))

    def __reduce__(self) -> Any:
        raise LocalOnly(
            "a TowerCache holds the output of this process's tower, which a server does not replay: its "
            "traces run the server's weights. Make the cache where it is replayed: call vision.cache and "
            "replay it inside one model.session(remote=...), or pass remote= to the analysis helper that "
            "caches (it then runs on the server whole), or let the remote trace run the tower. (A remote block carries every name it reads that is bound "
            "here, even one it binds again first: name the server's cache afresh.)"
        )


def _repeat(output: Any, copies: int, axis: int = 0) -> Any:
    """``output`` with every tensor repeated ``copies`` times along ``axis`` (the tower's
    batch, `Vision.batch_axis`), in new containers (a wrapper may reassign fields of the
    output it is handed, as LLaVA's and Qwen's replace ``pooler_output`` with its
    per-image split)."""
    if isinstance(output, torch.Tensor):
        if copies == 1 or output.dim() <= axis:
            return output
        times = [1] * output.dim()
        times[axis] = copies
        return output.repeat(*times)
    if isinstance(output, dict):  # transformers' ModelOutput is a dict too
        repeated = type(output)(**{key: _repeat(value, copies, axis) for key, value in output.items()})
        return repeated
    if isinstance(output, (list, tuple)):
        return type(output)(_repeat(item, copies, axis) for item in output)
    return output


def cache(model: Any, prompt: Any, images: Any) -> TowerCache:
    """Run ``prompt`` with ``images`` once, keeping the tower's output (`TowerCache`)."""
    vision = model.vision
    reason = vision.no_images()
    if reason:
        raise Unavailable(f"vision.cache is unavailable: {reason}")
    found: list = []
    with torch.no_grad(), model.trace(prompt, images=images) as tracer:
        found.append(_repeat(vision.output, 1).save())  # copied as the tower returns it
        tracer.stop()  # the tower's output is all this run is for
    return TowerCache(model, found[0], int(model._run.image_tokens.sum()))
