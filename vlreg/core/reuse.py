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
tower that packs every image into one row behind a leading axis of 1 (Pixtral's). A tower the
wrapper runs on each image alone (`Vision.per_image`) is cached a call an image, and each call of
a replay is handed its image's output. Tower values are not computed in a
trace that replays: reading one is refused with the reason.
"""

from __future__ import annotations

from typing import Any

import torch
from attrs import evolve

from .errors import LocalOnly, Unavailable
from .serving.values import _in_order

#: The inputs a processor derives from the prompt's text, not from its images.
TEXT_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids", "position_ids"})


def image_inputs(inputs: dict) -> dict:
    """What the processor made of a run's images: every tensor input but those laid out
    along the prompt's tokens (ids, masks, token types; Mllama's cross-attention mask)."""
    ids = inputs.get("input_ids")
    tokens = tuple(ids.shape) if isinstance(ids, torch.Tensor) else None
    return {
        key: value for key, value in inputs.items()
        if isinstance(value, torch.Tensor) and key not in TEXT_INPUTS
        and not (tokens is not None and value.dim() >= 2 and tuple(value.shape[:2]) == tokens)
    }


class TowerCache:
    """The tower's output for one prompt's images, to replay in traces of them.

    Made by ``model.vision.cache(prompt, images)``; ``image_tokens`` is how many image
    tokens the images make, and ``pixels`` what the processor made of the images (pixel
    values, grids, sizes): a trace replaying it must hold ``copies`` copies of exactly
    those, or the text model would receive another image's features.
    """

    def __init__(self, model: Any, output: Any, image_tokens: int, pixels: dict | None = None) -> None:
        self.model, self.output, self.image_tokens = model, output, image_tokens
        self.pixels = pixels or {}

    def replay(self, copies: int = 1) -> None:
        """Inside a trace whose images are ``copies`` copies of the cached ones, in order:
        skip the tower and hand on its cached output, repeated ``copies`` times. Refused,
        before the model runs, unless the processor made of the trace's images exactly
        ``copies`` copies of what it made of the cached ones."""
        model = self.model
        run = model.run
        if run.image_tokens is None or int(run.image_tokens.sum()) != copies * self.image_tokens:
            held = "no image tokens" if run.image_tokens is None else f"{int(run.image_tokens.sum())} image tokens"
            raise ValueError(
                f"this trace holds {held}, not {copies} cop{'y' if copies == 1 else 'ies'} of the cached images' "
                f"{self.image_tokens}: replay a cache only in a trace of the images it was made from (with the "
                f"processor options it was made with)"
            )
        differs = _differs(self.pixels, image_inputs(run.inputs), copies)
        if differs:
            raise ValueError(
                f"this trace's images are not {copies} cop{'y' if copies == 1 else 'ies'} of the cached ones: "
                f"the processor's {differs} differ from what it made of the images the cache was made from, "
                f"so the replay would hand the text model the cached images' features; make a cache of "
                f"these images (model.vision.cache(prompt, images)), or trace without replaying"
            )
        model._run = evolve(run, replaying=True)
        vision = model.vision
        if not vision.per_image:
            vision.skip(_repeat(self.output, copies, vision.batch_axis))
            return
        for call in range(copies * len(self.output)):  # each copy's images, in order, a call each
            with _in_order(vision, vision.label("output"), call):
                vision.skip(_repeat(self.output[call % len(self.output)], 1))

    def __reduce__(self) -> Any:
        raise LocalOnly(
            "a TowerCache holds the output of this process's tower, which a server does not replay: its "
            "traces run the server's weights. Make the cache where it is replayed: call vision.cache and "
            "replay it inside one model.session(remote=...), or pass remote= to the analysis helper that "
            "caches (it then runs on the server whole), or let the remote trace run the tower. (A remote block carries every name it reads that is bound "
            "here, even one it binds again first: name the server's cache afresh.)"
        )


def _differs(cached: dict, traced: dict, copies: int) -> str | None:
    """Which of the processor's image inputs of a trace are not ``copies`` copies of the
    cached ones (along their leading axis), in words; ``None`` when all are."""
    if cached.keys() != traced.keys():
        return f"inputs ({sorted(traced)} against the cache's {sorted(cached)})"
    for key, value in cached.items():
        other = traced[key]
        expected = value if copies == 1 else torch.cat([value] * copies, _packed_axis(value, other, copies))
        if other.shape != expected.shape or not torch.equal(other.to(expected.dtype), expected):
            if not _shifted_copies(value, other, copies):
                return f"{key}"
    return None


def _shifted_copies(cached: torch.Tensor, traced: torch.Tensor, copies: int) -> bool:
    """Whether ``traced`` is ``copies`` copies of ``cached`` along the leading axis whose
    indices (the entries >= 0; a negative one pads) each copy shifts by one step more: the
    processor's indices into a batch's patches, offset by each image's (Molmo 2's
    ``image_token_pooling``), which index the tower's repeated output alike."""
    if cached.is_floating_point() or copies < 2 or traced.shape != (copies * cached.shape[0], *cached.shape[1:]):
        return False
    chunks = traced.reshape(copies, *cached.shape).to(cached.dtype)
    valid = cached >= 0
    if not valid.any() or not torch.equal(chunks[:, ~valid], cached[~valid].expand(copies, -1)):
        return False
    shifts = chunks[:, valid] - cached[valid]
    step = shifts[1, 0]
    return torch.equal(shifts, (torch.arange(copies, dtype=shifts.dtype)[:, None] * step).expand_as(shifts))


def _packed_axis(cached: torch.Tensor, traced: torch.Tensor, copies: int) -> int:
    """The axis the processor lays a batch's images along: the leading one, or the one axis
    ``copies`` times as long in the trace where the processor packs every image into one row
    (MiniCPM-V's patches, side by side along the last)."""
    if cached.dim() != traced.dim():
        return 0
    longer = [axis for axis, (a, b) in enumerate(zip(cached.shape, traced.shape)) if a != b]
    return longer[0] if len(longer) == 1 and traced.shape[longer[0]] == copies * cached.shape[longer[0]] else 0


def _repeat(output: Any, copies: int, axis: int = 0) -> Any:
    """``output`` with every tensor repeated ``copies`` times along ``axis`` (the tower's
    batch, `Vision.batch_axis`), in new containers and new tensors: a wrapper may reassign
    fields of the output it is handed (LLaVA's and Qwen's replace ``pooler_output`` with its
    per-image split) or edit its tensors in place (Gemma 3n scales the tower's grid in
    place), and the cache must hand the next replay what the tower returned."""
    if isinstance(output, torch.Tensor):
        if copies == 1 or output.dim() <= axis:
            return output.clone()
        times = [1] * output.dim()
        times[axis] = copies
        return output.repeat(*times)
    if isinstance(output, dict):  # transformers' ModelOutput is a dict too
        repeated = type(output)(**{key: _repeat(value, copies, axis) for key, value in output.items()})
        return repeated
    if isinstance(output, (list, tuple)):
        return type(output)(_repeat(item, copies, axis) for item in output)
    return output


def cache(model: Any, prompt: Any, images: Any, **options: Any) -> TowerCache:
    """Run ``prompt`` with ``images`` once (with the processor's ``options``), keeping the
    tower's output and what the processor made of the images (`TowerCache`)."""
    vision = model.vision
    reason = vision.no_images()
    if reason:
        raise Unavailable(f"vision.cache is unavailable: {reason}")
    found: list = []
    with torch.no_grad(), model.trace(prompt, images=images, **options) as tracer:
        if not vision.per_image:
            found.append(_repeat(vision.output, 1).save())  # copied as the tower returns it
        else:  # a call an image: each call's output, in order
            for call in range(int(model.run.inputs["pixel_values"].shape[0])):
                with _in_order(vision, vision.label("output"), call):
                    found.append(_repeat(vision.output, 1).save())
        tracer.stop()  # the tower's output is all this run is for
    pixels = {key: value.clone() for key, value in image_inputs(model.run.inputs).items()}
    output = found if vision.per_image else found[0]
    return TowerCache(model, output, int(model.run.image_tokens.sum()), pixels)
