"""Gradients to the image: saliency (gradient x input) and integrated gradients, at the
image tokens and at the pixels of the image the user passed.

At the tokens, the input is ``vision.image_features``, as the text model receives them. At
the pixels, the input is the image itself: the run hands the processor the image as float
pixels that require a gradient, so autograd carries the gradient back through the
processor's own resize, crop, normalization and patching to the picture as given, pixel by
pixel (a processor that runs outside torch, on PIL, passes none, and is refused). Each map
is per image, in the picture's own size, and `per_token` pools a pixel map over each token's
box (`ImageGeometry.boxes`), for the token-level pictures.

Integrated gradients (Sundararajan et al. 2017) average the gradient along the straight
path from a baseline to the input, ``steps`` points by the midpoint rule, ``batch`` points a
forward as copies of the prompt; the attributions then add up to the metric's change from
the baseline to the input (completeness), up to the rule's error, which `completeness`
reports.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy
import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from ..core.images.options import takes_processor_options
from ..core.images.processing import leaves
from ..core.remote import remotely
from .tokens import _chunks, _images, in_stream, token_id, warn_if_turn_ended

Metric = Callable[[torch.Tensor], torch.Tensor]


@frozen
class Saliency:
    """Gradient x input of the metric at ``position`` (by default the ``target`` logit, by
    default the model's likeliest token): per image, ``tokens`` ``[tokens]`` at its image
    tokens (the features' gradient dotted with them) and ``pixels`` ``[height, width]`` at
    its pixels (summed over the colour channels), or ``None`` where not asked for."""

    target: int | None
    position: int
    tokens: list[torch.Tensor]
    pixels: list[torch.Tensor] | None
    geometry: list[ImageGeometry]

    def per_token(self, image: int = 0) -> torch.Tensor:
        """Image ``image``'s pixel map summed over each token's box: ``[tokens]``."""
        if self.pixels is None:
            raise ValueError("this saliency has no pixel maps: run it with pixels=True")
        return pooled(self.pixels[image], self.geometry[image])


@frozen
class IntegratedGradients:
    """Integrated gradients of the metric at ``position`` from ``baseline`` to the input, at
    ``at`` (``"pixels"``: per image ``[height, width]``, summed over the colour channels;
    ``"tokens"``: per image ``[tokens]``). ``metric`` and ``baseline_metric`` are the metric
    on the input and on the baseline; ``completeness`` is the attributions' sum minus their
    difference, which the path integral makes 0 (the midpoint rule leaves a remainder that
    shrinks as ``steps`` grows)."""

    at: str
    steps: int
    target: int | None
    position: int
    attributions: list[torch.Tensor]
    metric: float
    baseline_metric: float
    geometry: list[ImageGeometry]

    @property
    def completeness(self) -> float:
        return float(sum(a.sum() for a in self.attributions)) - (self.metric - self.baseline_metric)

    def per_token(self, image: int = 0) -> torch.Tensor:
        """Image ``image``'s attributions per token (a pixel map summed over each token's box)."""
        found = self.attributions[image]
        return found if self.at == "tokens" else pooled(found, self.geometry[image])


def pooled(pixels: torch.Tensor, geometry: ImageGeometry) -> torch.Tensor:
    """``pixels`` (``[height, width]`` of the original image) summed over each token's box."""
    sums = []
    height, width = pixels.shape
    for x0, y0, x1, y1 in geometry.boxes.tolist():
        if any(map(lambda v: v != v, (x0, y0, x1, y1))):  # a box over padding (NaN)
            sums.append(0.0)
            continue
        box = pixels[max(0, int(y0)):min(height, int(round(y1))), max(0, int(x0)):min(width, int(round(x1)))]
        sums.append(float(box.sum()))
    return torch.tensor(sums)


def _as_pixels(image: Any) -> torch.Tensor:
    """An image as float ``[channels, height, width]`` pixels in 0-255 that require a gradient."""
    if isinstance(image, torch.Tensor):
        found = image.detach().float()
        found = found if found.shape[0] in (1, 3) else found.permute(2, 0, 1)
    else:
        found = torch.from_numpy(numpy.asarray(image.convert("RGB") if hasattr(image, "convert") else image).copy())
        found = found.float().permute(2, 0, 1)
    return found.contiguous().requires_grad_()


def _nested(images: Any, flat: list) -> Any:
    """``flat`` (one per leaf of ``images``) in ``images``' nesting."""
    it = iter(flat)

    def rebuild(item: Any) -> Any:
        return [rebuild(each) for each in item] if isinstance(item, (list, tuple)) else next(it)

    return rebuild(images)


def pixel_refusal(model: Any) -> str | None:
    """Why no gradient reaches this model's pixels (``None``: it does): `saliency` with
    ``pixels`` and `integrated_gradients` at the pixels refuse with it before running."""
    if "image_codes" in type(model.vision).values() and model.vision.why_unavailable("image_codes") is None:
        return ("this family reads the image as discrete codes (vision.image_codes), through which no gradient "
                "flows")
    from transformers.video_processing_utils import BaseVideoProcessor

    processor = getattr(model.processor, "image_processor", None)
    if isinstance(processor, BaseVideoProcessor):  # InstructBLIP-Video's frames: batched through numpy
        return ("this family's images go through a video processor, which batches frames through numpy, so no "
                "gradient reaches the picture")
    if not model.vision.takes_arrays or getattr(processor, "backend", None) != "torchvision":
        return ("this family's image processor is no torchvision one (it converts to PIL or numpy), so no gradient "
                "reaches the picture")
    return None


def _takes_pixels(model: Any) -> None:
    reason = pixel_refusal(model)
    if reason is not None:
        raise Unavailable(f"gradients at the pixels are unavailable: {reason}; read them at the image tokens "
                          f"(pixels=False, at='tokens')")


def _metric(model: Any, logits: torch.Tensor, metric: Metric | None, target: Any) -> tuple[torch.Tensor, int | None]:
    if metric is not None:
        return metric(logits), None
    wanted = int(logits.argmax()) if target is None else token_id(model, target)
    return logits[wanted], wanted


@remotely(gradients=True)
@takes_processor_options
def saliency(
    model: Any,
    prompt: str,
    images: Any,
    *,
    metric: Metric | None = None,
    target: "int | str | None" = None,
    position: int = -1,
    pixels: bool = True,
) -> Saliency:
    """Gradient x input of ``metric`` (of the logits at ``position``, ``[vocab]``; by default
    the ``target`` logit, by default the likeliest token's) at every image token and, with
    ``pixels``, at every pixel of each image as given: one forward and one backward."""
    in_stream(model, "saliency")
    warn_if_turn_ended(model, prompt, position, "saliency")
    images = _images(images)
    if pixels:
        _takes_pixels(model)
    geometry = model.vision.geometry(prompt, images)
    row = geometry[0].row
    pictures = [_as_pixels(each) for each in leaves(images)] if pixels else []
    given = _nested(images, pictures) if pixels else images
    wanted: list = []
    with model.trace(prompt, images=given):
        features = model.vision.image_features
        measured, chosen = _metric(model, model.logits[row, position].float(), metric, target)
        wanted.append(chosen)
        with measured.backward(inputs=[features, *pictures]):
            grad = features.grad.save()
        tokens = (features.detach().float() * grad.float()).sum(-1).save()
    maps = None
    if pixels:
        if any(picture.grad is None for picture in pictures):
            _takes_pixels_failed()
        maps = [(picture.grad * picture.detach()).sum(0) for picture in pictures]
    per_image = [tokens[image.features] for image in geometry]
    return Saliency(target=wanted[0], position=position, tokens=per_image, pixels=maps, geometry=geometry)


def _takes_pixels_failed() -> None:
    raise Unavailable(
        "gradients at the pixels are unavailable: the processor made the pixel values outside torch, so no "
        "gradient reached the picture; read them at the image tokens (pixels=False, at='tokens')"
    )


@remotely(gradients=True)
@takes_processor_options
def integrated_gradients(
    model: Any,
    prompt: str,
    images: Any,
    *,
    at: str = "pixels",
    baseline: Any = None,
    steps: int = 32,
    batch: int = 8,
    metric: Metric | None = None,
    target: "int | str | None" = None,
    position: int = -1,
) -> IntegratedGradients:
    """Integrated gradients of ``metric`` (as `saliency` takes it; the ``target`` is fixed on
    the input) from ``baseline`` to the input, ``at`` the pixels (``baseline``: ``"black"``,
    the default, ``"blur"`` or images as given) or the image ``"tokens"`` (``baseline``:
    ``"zero"``, the default, a ``[hidden_size]`` or ``[image_tokens, hidden_size]`` tensor, or images as given,
    whose features are the baseline: they must give as many tokens). ``steps`` points along the path, ``batch`` of
    them a forward as copies of the prompt. A baseline the metric jumps from (zero features where the text model
    normalizes them, black pixels) needs many steps to pass `completeness`; another image needs few."""
    in_stream(model, "integrated_gradients")
    warn_if_turn_ended(model, prompt, position, "integrated_gradients")
    if not isinstance(prompt, str):
        raise ValueError("integrated_gradients runs copies of one prompt in a batch: pass the prompt as a string")
    if at not in ("pixels", "tokens"):
        raise ValueError(f"at is 'pixels' or 'tokens', not {at!r}")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    run = _pixel_path if at == "pixels" else _token_path
    baseline = ("black" if at == "pixels" else "zero") if baseline is None else baseline
    return run(model, prompt, images, geometry, baseline, steps, batch, metric, target, position)


def _alphas(steps: int) -> torch.Tensor:
    return (torch.arange(steps, dtype=torch.float64) + 0.5) / steps


def _pixel_baseline(baseline: Any, picture: torch.Tensor, index: int) -> torch.Tensor:
    if isinstance(baseline, str):
        if baseline == "black":
            return torch.zeros_like(picture)
        if baseline == "blur":
            from PIL import ImageFilter, Image

            pil = Image.fromarray(picture.detach().permute(1, 2, 0).clamp(0, 255).byte().numpy())
            return _as_pixels(pil.filter(ImageFilter.GaussianBlur(radius=max(picture.shape[1:]) / 16))).detach()
        raise ValueError(f"a pixel baseline is 'black', 'blur' or images as given, not {baseline!r}")
    return _as_pixels(leaves(baseline)[index]).detach()


def _pixel_path(model, prompt, images, geometry, baseline, steps, batch, metric, target, position):
    _takes_pixels(model)
    originals = [_as_pixels(each).detach() for each in leaves(images)]
    bases = [_pixel_baseline(baseline, picture, i) for i, picture in enumerate(originals)]
    if any(b.shape != o.shape for b, o in zip(bases, originals)):
        raise ValueError("a baseline image must have the size of the image it stands for")
    _bright_enough(model, originals, bases, steps)
    wanted = _fixed_target(model, prompt, images, metric, target, position, geometry[0].row)
    ends = _pixel_metrics(model, prompt, images, [[o for o in originals], [b for b in bases]], wanted, position)
    total = [torch.zeros_like(o) for o in originals]
    for chunk in _chunks(steps, batch):
        points = [[b + float(a) * (o - b) for o, b in zip(originals, bases)] for a in _alphas(steps)[chunk]]
        leaves_of = [[p.requires_grad_() for p in point] for point in points]
        flat = [p for point in leaves_of for p in point]
        kept: list = []  # made outside the trace: only saved names leave it
        with model.trace([prompt] * len(points), images=[_nested(images, point) for point in leaves_of]):
            logits = model.logits[:, position].float()
            measured = sum(wanted(logits[k]) for k in range(len(points)))
            kept.extend(torch.autograd.grad(measured, flat, allow_unused=True))
        if any(g is None for g in kept):
            _takes_pixels_failed()
        for k in range(len(points)):
            for i in range(len(originals)):
                total[i] += kept[k * len(originals) + i]
    maps = [((o - b) * t / steps).sum(0) for o, b, t in zip(originals, bases, total)]
    return IntegratedGradients(at="pixels", steps=steps, target=getattr(wanted, "token", None), position=position,
                               attributions=maps, metric=ends[0], baseline_metric=ends[1], geometry=geometry)


def _bright_enough(model: Any, originals: list, bases: list, steps: int) -> None:
    """Refuse a path with a point no pixel of which is above 1 (of 255): the image inputs'
    check takes such floats for a 0..1 image and refuses it, in words about the user's input."""
    if not getattr(getattr(model.processor, "image_processor", None), "do_rescale", False):
        return
    for alpha in _alphas(steps).tolist():
        if any(0 < float((b + alpha * (o - b)).max()) <= 1 for o, b in zip(originals, bases)):
            raise ValueError(
                f"with {steps} steps, the path from this baseline passes an image whose pixels are all at most 1 "
                f"of 255 (at {alpha:.4f} of the way), which the image processor would take for a 0..1 image: take "
                f"fewer steps, or another baseline ('blur', or images as given)")


class _Wanted:
    """The metric, with the target fixed on the input's run (the same token along the path)."""

    def __init__(self, metric: Metric | None, token: int | None) -> None:
        self.metric, self.token = metric, token

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        return self.metric(logits) if self.metric is not None else logits[self.token]


def _fixed_target(model, prompt, images, metric, target, position, row) -> _Wanted:
    if metric is not None:
        return _Wanted(metric, None)
    if target is not None:
        return _Wanted(None, token_id(model, target))
    with torch.no_grad(), model.trace(prompt, images=images):
        logits = model.logits[row, position].save()
    return _Wanted(None, int(logits.argmax()))


def _pixel_metrics(model, prompt, images, runs, wanted, position) -> list[float]:
    """The metric on the input's pixels and on the baseline's, as the path's ends run."""
    with torch.no_grad(), model.trace([prompt] * len(runs), images=[_nested(images, run) for run in runs]):
        logits = model.logits[:, position].save()
    return [float(wanted(logits[k].float())) for k in range(len(runs))]


def _token_path(model, prompt, images, geometry, baseline, steps, batch, metric, target, position):
    shape = (sum(image.tokens for image in geometry), model._module.config.get_text_config().hidden_size)
    if isinstance(baseline, (str, torch.Tensor)):
        _token_baseline(baseline, torch.empty(shape, device="meta"))  # refused before anything runs
    else:
        baseline = _features_of(model, prompt, baseline)
    with torch.no_grad(), model.trace(prompt, images=images):
        features = model.vision.image_features.detach().clone().save()
    base = _token_baseline(baseline, features)
    wanted = _fixed_target(model, prompt, images, metric, target, position, geometry[0].row)
    cache = model.vision.cache(prompt, images)
    ends = _token_metrics(model, prompt, images, cache, [features, base], wanted, position)
    total = torch.zeros_like(features, dtype=torch.float32)
    for chunk in _chunks(steps, batch):
        alphas = _alphas(steps)[chunk]
        written = torch.cat([base + float(a) * (features - base) for a in alphas]).requires_grad_()
        with model.trace([prompt] * len(alphas), images=[list(leaves(images)) for _ in alphas]):
            cache.replay(copies=len(alphas))
            model.vision.image_features = written
            logits = model.logits[:, position].float()
            measured = sum(wanted(logits[k]) for k in range(len(alphas)))
            grad = torch.autograd.grad(measured, written)[0].save()
        total += grad.float().reshape(len(alphas), *features.shape).sum(0)
    attributions = ((features - base).float() * total / steps).sum(-1)
    return IntegratedGradients(at="tokens", steps=steps, target=wanted.token, position=position,
                               attributions=[attributions[image.features] for image in geometry],
                               metric=ends[0], baseline_metric=ends[1], geometry=geometry)


def _features_of(model: Any, prompt: str, images: Any) -> torch.Tensor:
    """The features ``images`` give in ``prompt`` (a token path's baseline)."""
    with torch.no_grad(), model.trace(prompt, images=_images(images)):
        features = model.vision.image_features.detach().clone().save()
    return features


def _token_baseline(baseline: Any, features: torch.Tensor) -> torch.Tensor:
    if isinstance(baseline, str):
        if baseline == "zero":
            return torch.zeros_like(features)
        raise ValueError(f"a token baseline is 'zero', a tensor or images, not {baseline!r}")
    if baseline.shape[-1] != features.shape[-1] or baseline.dim() > 1 and baseline.shape != features.shape:
        raise ValueError(f"a token baseline is [{features.shape[-1]}] or {list(features.shape)} (the features' "
                         f"shape), not {list(baseline.shape)}: baseline images must give as many image tokens")
    return baseline.to(features).expand_as(features).clone()


def _token_metrics(model, prompt, images, cache, runs, wanted, position) -> list[float]:
    found = []
    for written in runs:
        with torch.no_grad(), model.trace(prompt, images=images):
            cache.replay()
            model.vision.image_features = written
            logits = model.logits[0, position].save()
        found.append(float(wanted(logits.float())))
    return found
