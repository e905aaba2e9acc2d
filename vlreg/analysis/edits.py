"""Edits at the image tokens: ablating an image's features (all at once or token by
token) and patching a block's output from a run on another image.

Every run of the same prompt and images after the first replays the tower's output
(`Vision.cache`): the edits are after the tower, so a sweep of many runs, or of many
copies in a batch, runs the tower once."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..core.images.geometry import ImageGeometry
from ..core.images.options import takes_processor_options
from ..core.remote import remotely
from .tokens import (_chunks, _copies, _count, _images, _layers, in_stream, stream_written, token_id,
                     warn_if_turn_ended)


@frozen
class Ablation:
    """Logits at ``(row, position)`` with image ``image``'s features as they were
    (``clean``) and edited (``ablated``), both ``[vocab]``; ``received`` is what block 0
    then received at that image's tokens, ``[tokens, hidden_size]``."""

    image: int
    position: int
    clean: torch.Tensor
    ablated: torch.Tensor
    received: torch.Tensor
    geometry: list[ImageGeometry]

    @property
    def effect(self) -> torch.Tensor:
        return self.ablated - self.clean


@remotely()
@takes_processor_options
def ablate_image(
    model: Any,
    prompt: Any,
    images: Any,
    *,
    image: int = 0,
    mode: "str | torch.Tensor" = "zero",
    tokens: Sequence[int] | None = None,
    position: int = -1,
) -> Ablation:
    """Replace image ``image``'s features as the text model receives them
    (``vision.image_features`` at that image's rows), at all its tokens or at ``tokens``
    (indices among its tokens), and read the logits at ``position`` of its batch row.

    ``mode``: ``"zero"``; ``"mean"``, the mean of that image's features over all its
    tokens; or a tensor, ``[hidden_size]`` or ``[tokens, hidden_size]`` (a row per token of
    the image), such as a mean over a data set."""
    in_stream(model, "ablate_image")
    warn_if_turn_ended(model, prompt, position, "ablate_image")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    return _ablate(model, prompt, images, geometry, image, mode, tokens, position)


def _replacement(features: Any, chosen: ImageGeometry, mode: "str | torch.Tensor", tokens: Any) -> Any:
    """What replaces image ``chosen``'s features at ``tokens`` (None: all of them)."""
    if isinstance(mode, torch.Tensor):
        return mode if mode.dim() == 1 or tokens is None else mode[list(tokens)]
    if mode == "zero":
        return 0
    if mode == "mean":
        return features[chosen.features].mean(0)
    raise ValueError(f"mode is 'zero', 'mean' or a tensor, not {mode!r}")


def _clean(model: Any, prompt: Any, images: list, cache: Any, row: int, position: int) -> torch.Tensor:
    """The unedited logits at ``(row, position)``, the tower replayed from ``cache``."""
    with torch.no_grad(), model.trace(prompt, images=images):
        cache.replay()
        logits = model.logits[row, position].save()
    return logits.detach()


def _ablate(model, prompt, images, geometry, image, mode, tokens, position) -> Ablation:
    chosen = geometry[image]
    rows = chosen.features if tokens is None else torch.as_tensor(list(tokens)) + chosen.offset
    cache = model.vision.cache(prompt, images)
    clean = _clean(model, prompt, images, cache, chosen.row, position)
    with torch.no_grad(), model.trace(prompt, images=images):
        cache.replay()
        features = model.vision.image_features
        replacement = _replacement(features, chosen, mode, tokens)
        features[rows] = replacement.to(features.dtype) if isinstance(replacement, torch.Tensor) else replacement
        received = model.prompt_entry()[chosen.row, chosen.positions].save()
        ablated = model.logits[chosen.row, position].save()
    return Ablation(image, position, clean, ablated.detach(), received.detach(), geometry)


@frozen
class Occlusion:
    """For each of image ``image``'s tokens, how much the ``target`` logit at ``position``
    drops when that one token's features are replaced (``scores``, ``[tokens]``)."""

    image: int
    target: int
    position: int
    scores: torch.Tensor
    geometry: list[ImageGeometry]


@remotely()
@takes_processor_options
def occlusion(
    model: Any,
    prompt: str,
    images: Any,
    *,
    image: int = 0,
    mode: "str | torch.Tensor" = "mean",
    target: "int | str | None" = None,
    position: int = -1,
    batch: int = 16,
) -> Occlusion:
    """`ablate_image` one token at a time. The edits run ``batch`` at a time as copies of
    the prompt in one batch, each chunk with one unedited copy the drops are measured
    against; ``target`` defaults to the unedited run's most likely token."""
    in_stream(model, "occlusion")
    warn_if_turn_ended(model, prompt, position, "occlusion")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    chosen = geometry[image]
    wanted = None if target is None else token_id(model, target)
    cache = model.vision.cache(prompt, images)
    drops = []
    for tokens in _chunks(chosen.tokens, batch):
        prompts, pictures, copies = _copies(model, prompt, images, len(tokens) + 1)
        edited = [copies[k * _count(images) + image] for k in range(len(tokens))]
        rows = torch.tensor([copy.offset + token for copy, token in zip(edited, tokens)])
        with torch.no_grad(), model.trace(prompts, images=pictures):
            cache.replay(copies=len(prompts))
            features = model.vision.image_features
            replacement = _replacement(features, edited[0], mode, tokens)
            features[rows] = replacement.to(features.dtype) if isinstance(replacement, torch.Tensor) else replacement
            logits = model.logits[:, position].save()
        wanted = int(logits[-1].argmax()) if wanted is None else wanted
        drops.append(logits[-1, wanted] - logits[:-1, wanted])
    return Occlusion(image, wanted, position, torch.cat(drops).detach(), geometry)


@frozen
class Patching:
    """The ``target`` logit at ``position`` of the target run when a block's output at
    image ``image``'s tokens is taken from the source run: ``effects`` is patched minus
    ``clean``, ``[layers]``, or ``[layers, tokens]`` patching one token at a time.
    ``source`` is the target logit on the source run. ``patched`` holds the patched runs'
    whole logits at ``position``, ``[layers, vocab]`` (what the model now answers), or
    None when patching one token at a time."""

    image: int
    layers: tuple[int, ...]
    target: int
    position: int
    clean: float
    source: float
    effects: torch.Tensor
    geometry: list[ImageGeometry]
    patched: torch.Tensor | None = None


@remotely()
@takes_processor_options
def patch_image(
    model: Any,
    prompt: Any,
    images: Any,
    source_images: Any,
    *,
    image: int = 0,
    source_prompt: Any = None,
    layers: Sequence[int] | None = None,
    target: "int | str | None" = None,
    position: int = -1,
    tokens: Sequence[int] | None = None,
    per_token: bool = False,
    batch: int = 16,
) -> Patching:
    """Patch ``layers[i].layer_output`` at image ``image``'s tokens from a run on
    ``source_images`` (and ``source_prompt``, by default ``prompt``) into the run on
    ``images``, one block at a time. The two images must have the same token grid.
    ``target`` defaults to the source run's most likely token at ``position``. ``tokens``
    (indices among the image's tokens) patches only those, in one edit. With
    ``per_token``, one token at a time: ``batch`` edits a trace, as copies of the prompt in
    one batch, measured against an unedited copy in the same batch."""
    in_stream(model, "patch_image")
    warn_if_turn_ended(model, prompt, position, "patch_image")
    images, source_images = _images(images), _images(source_images)
    source_prompt = prompt if source_prompt is None else source_prompt
    geometry = model.vision.geometry(prompt, images)
    donor = model.vision.geometry(source_prompt, source_images)[image]
    chosen = geometry[image]
    if [(g.rows, g.columns) for g in donor.grids] != [(g.rows, g.columns) for g in chosen.grids]:
        raise ValueError("the source image's token grid differs from the target's: resize one to the other's size")
    blocks = model.prompt_layers  # where the image's tokens are: the encoder's, on an encoder-decoder
    layers = _layers(model, layers, blocks)
    stream_written(model, "patch_image", [blocks[layer] for layer in layers])
    chosen_tokens = torch.arange(chosen.tokens) if tokens is None else torch.as_tensor(list(tokens), dtype=torch.long)
    saved: list = []
    with torch.no_grad(), model.trace(source_prompt, images=source_images):
        for layer in layers:
            saved.append(blocks[layer].layer_output[donor.row, donor.positions[chosen_tokens]].save())
        source_logits = model.logits[donor.row, position].save()
    wanted = int(source_logits.argmax()) if target is None else token_id(model, target)
    cache = model.vision.cache(prompt, images)
    clean = _clean(model, prompt, images, cache, chosen.row, position)[wanted]
    patched = None
    if per_token:
        effects = torch.stack([
            _patch_each(model, prompt, images, image, layer, stream.detach(), chosen_tokens, wanted, position, batch, cache)
            for layer, stream in zip(layers, saved)
        ])
    else:
        runs = []
        for layer, stream in zip(layers, saved):
            with torch.no_grad(), model.trace(prompt, images=images):
                cache.replay()
                blocks[layer].layer_output[chosen.row, chosen.positions[chosen_tokens]] = stream.detach()
                runs.append(model.logits[chosen.row, position].save())
        patched = torch.stack([run.detach() for run in runs])
        effects = (patched[:, wanted] - clean).float()
    return Patching(
        image=image,
        layers=layers,
        target=wanted,
        position=position,
        clean=float(clean),
        source=float(source_logits[wanted]),
        effects=effects,
        geometry=geometry,
        patched=patched,
    )


def _patch_each(model, prompt, images, image, layer, stream, chosen, wanted, position, batch, cache) -> torch.Tensor:
    """Effects of patching block ``layer``'s output at one of the ``chosen`` image tokens
    at a time (``stream`` holds the source's rows of those tokens)."""
    effects = []
    for rows_of_stream in _chunks(stream.shape[0], batch):
        tokens = chosen[rows_of_stream].tolist()
        prompts, pictures, copies = _copies(model, prompt, images, len(tokens) + 1)
        edited = [copies[k * _count(images) + image] for k in range(len(tokens))]
        rows = torch.tensor([copy.row for copy in edited])
        positions = torch.stack([copy.positions[token] for copy, token in zip(edited, tokens)])
        with torch.no_grad(), model.trace(prompts, images=pictures):
            cache.replay(copies=len(prompts))
            model.prompt_layers[layer].layer_output[rows, positions] = stream[rows_of_stream]
            logits = model.logits[:, position, wanted].save()
        effects.append(logits[:-1] - logits[-1])
    return torch.cat(effects).detach().float()
