"""A dictionary's features over the image: a feature's map on each image's token grid,
the top features of a region or a token, and the features most selective for image
tokens over text tokens.

Every helper runs its own trace on an attached `Dictionary` and encodes the value where
the model holds it (a view of each image's rows; see `Dictionary.rows`), then moves only
the activations off the model. A tower value is over patches: its activations are
averaged over each token's patches (the merge block on the Qwen ViT, ``ImageGrid.fold``
x ``fold`` patches elsewhere), so its maps are on the same token grid.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import frozen

from ..analysis.tokens import _count, _images, _where, in_stream
from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from ..core.images.options import given, takes_processor_options
from ..core.images.processing import encode
from ..core.remote import remotely
from .dictionary import Dictionary


@frozen
class FeatureMaps:
    """Feature activations at every image token: ``activations[i]`` is image ``i``'s
    ``[tokens, features]`` (float32, on the CPU), its tokens in sequence order as
    ``geometry[i]`` lays them out; ``features`` are the dictionary's feature ids of the
    columns (all of them by default)."""

    site: str
    features: tuple[int, ...]
    activations: list[torch.Tensor]
    geometry: list[ImageGeometry]

    def map(self, feature: int, image: int = 0) -> torch.Tensor:
        """``feature``'s activation at each of image ``image``'s tokens, ``[tokens]``:
        draw it with `vlreg.pictures.feature_map` or `overlay`."""
        return self.activations[image][:, self._column(feature)]

    def top(self, k: int = 10, *, image: int = 0, box: Sequence[float] | None = None,
            tokens: "int | Sequence[int] | None" = None) -> list[tuple[int, float]]:
        """The ``k`` features most active, on average, over a region of image ``image``:
        the tokens whose boxes overlap ``box`` (``(x0, y0, x1, y1)`` in the image's
        pixels), or ``tokens`` (one index among its tokens, or several), or the whole
        image. Returns ``(feature, mean activation)`` pairs, most active first."""
        chosen = self.tokens_in(box, image) if box is not None else tokens
        acts = self.activations[image]
        acts = acts if chosen is None else acts[torch.as_tensor(chosen, dtype=torch.long).reshape(-1)]
        if acts.shape[0] == 0:
            raise ValueError(f"no token of image {image} overlaps the box {tuple(box)}" if box is not None
                             else "no tokens given")
        means = acts.mean(0)
        best = means.topk(min(k, means.numel()))
        return [(self.features[i], float(v)) for i, v in zip(best.indices.tolist(), best.values)]

    def tokens_in(self, box: Sequence[float], image: int = 0) -> list[int]:
        """Image ``image``'s tokens whose boxes overlap ``box`` ``(x0, y0, x1, y1)``."""
        x0, y0, x1, y1 = box
        b = self.geometry[image].boxes
        return ((b[:, 0] < x1) & (x0 < b[:, 2]) & (b[:, 1] < y1) & (y0 < b[:, 3])).nonzero()[:, 0].tolist()

    def _column(self, feature: int) -> int:
        try:
            return self.features.index(feature)
        except ValueError:
            raise ValueError(f"feature {feature} was not kept: these maps hold {len(self.features)} features") from None


@remotely(model_of=lambda dictionary: dictionary._model())
@takes_processor_options(model_of=lambda dictionary: dictionary._model())
def feature_maps(dictionary: Dictionary, prompt: Any, images: Any, *, features: Sequence[int] | None = None) -> FeatureMaps:
    """Encode the attached value at every image token of ``prompt`` with ``images`` (as
    ``model.trace`` takes them) and keep ``features`` (default: all)."""
    model = dictionary._model()
    if dictionary.site.startswith("layers"):
        in_stream(model, f"feature_maps at {dictionary.site}")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    kept = tuple(range(dictionary.features)) if features is None else tuple(int(f) for f in features)
    if kept and not 0 <= min(kept) <= max(kept) < dictionary.features:
        raise ValueError(f"features are ids below {dictionary.features}, not {kept}")
    columns = None if features is None else torch.tensor(kept, dtype=torch.long, device=dictionary.W_enc.device)
    pick = (lambda acts: acts) if columns is None else (lambda acts: acts.index_select(-1, columns))  # noqa: E731
    saved: list = []
    with torch.no_grad(), model.trace(prompt, images=images):
        if dictionary.site.startswith("vision.layers"):
            saved.append(pick(dictionary.encode(dictionary.read())).save())
        else:
            value = dictionary.read()
            for image in geometry:
                rows = dictionary._image_rows(value, image)
                rows = value[image.row, image.positions] if rows is None else rows  # read only: a copy will do
                saved.append(pick(dictionary.encode(rows)).save())
    if dictionary.site.startswith("vision.layers"):
        activations = _tower_tokens(model, prompt, images, geometry, saved[0].detach().float().cpu())
    else:
        activations = [acts.detach().float().cpu() for acts in saved]
    return FeatureMaps(dictionary.site, kept, activations, geometry)


def _tower_tokens(model: Any, prompt: Any, images: list, geometry: list[ImageGeometry], acts: torch.Tensor) -> list:
    """Patch activations ``[crops, patches, features]`` as each image's ``[tokens, features]``."""
    vision = model.vision
    acts = acts[None] if acts.dim() == 2 else acts  # a block's native input on a packed tower: [patches, features]
    if hasattr(vision, "spatial_merge_size") and acts.shape[0] == 1:  # the Qwen ViT: every image's patches in one row
        acts = acts[0]
        if hasattr(vision, "to_scatter_order"):
            acts = vision.to_scatter_order(acts, encode(model.processor, prompt, images, **given(model))["image_grid_thw"], dim=0)
        unit = vision.spatial_merge_size ** 2
        found, start = [], 0
        for image in geometry:
            found.append(acts[start : start + image.tokens * unit].reshape(image.tokens, unit, -1).mean(1))
            start += image.tokens * unit
        return found
    if any(grid.resampled for image in geometry for grid in image.grids):
        raise Unavailable("the image tokens are a resampler's latents, each reading every patch of its frame "
                          "(ImageGrid.resampled), so no patch belongs to one token: attach the dictionary to a "
                          "text value or vision.image_features")
    if acts.shape[0] != _count(images):
        raise Unavailable(f"the tower ran on {acts.shape[0]} crops for {_count(images)} images, so its patches do not "
                          "map onto one token grid: attach the dictionary to a text value or vision.image_features")
    found = []
    for index, image in enumerate(geometry):
        if len(image.grids) != 1:
            raise Unavailable("the tower's patches map onto one grid per image; this image has several")
        grid, prefix = image.grids[0], vision.class_tokens
        side = grid.fold
        patches = acts[index, prefix : prefix + grid.tokens * side * side]
        if patches.shape[0] != grid.tokens * side * side:
            raise Unavailable(f"the tower holds {acts.shape[1]} positions for image {index}, not {prefix} class tokens "
                              f"and {grid.rows * side} x {grid.columns * side} patches")
        raster = patches.reshape(grid.rows, side, grid.columns, side, -1)
        found.append(raster.mean((1, 3)).reshape(grid.tokens, -1))
    return found


@frozen
class Selectivity:
    """How each feature fires at image tokens and at text tokens (padding excluded):
    ``image_rate`` and ``text_rate`` are the share of tokens where it is active,
    ``image_mean`` and ``text_mean`` its mean activation, all ``[features]``."""

    image_rate: torch.Tensor
    text_rate: torch.Tensor
    image_mean: torch.Tensor
    text_mean: torch.Tensor

    @property
    def score(self) -> torch.Tensor:
        """``image_rate - text_rate``: 1 fires at every image token and no text token,
        -1 the reverse."""
        return self.image_rate - self.text_rate

    def top(self, k: int = 10, text: bool = False) -> list[tuple[int, float]]:
        """The ``k`` features most selective for image tokens (``text``: for text
        tokens), as ``(feature, score)``."""
        score = -self.score if text else self.score
        best = score.topk(min(k, score.numel()))
        return list(zip(best.indices.tolist(), best.values.tolist()))


@remotely(model_of=lambda dictionary: dictionary._model())
@takes_processor_options(model_of=lambda dictionary: dictionary._model())
def selectivity(dictionary: Dictionary, prompt: Any, images: Any) -> Selectivity:
    """Each feature's firing at the image tokens against the text tokens of ``prompt``
    (one prompt or a list, with its images). Only for values in the text stream
    (``layers[i].layer_output``, ``layers[i].input``), where both kinds of token are."""
    model = dictionary._model()
    if not dictionary.site.startswith("layers"):
        raise ValueError(f"selectivity compares image and text tokens, which only the text stream holds, not {dictionary.site}")
    in_stream(model, "selectivity")
    images = _images(images)
    geometry = model.vision.geometry(prompt, images)
    attended = encode(model.processor, prompt, images, **given(model))["attention_mask"].bool()
    image_mask = torch.zeros_like(attended)
    image_mask[_where(geometry)] = True
    masks = torch.stack([image_mask, attended & ~image_mask]).to(dictionary.W_enc.device, dictionary.W_enc.dtype)
    with torch.no_grad(), model.trace(prompt, images=images):
        acts = dictionary.encode(dictionary.read())
        sums = torch.einsum("bsf,kbs->kf", acts, masks).save()
        active = torch.einsum("bsf,kbs->kf", (acts > 0).to(acts.dtype), masks).save()
    counts = masks.float().sum((1, 2))[:, None].clamp(min=1)
    means, rates = sums.detach().float().cpu() / counts.cpu(), active.detach().float().cpu() / counts.cpu()
    return Selectivity(image_rate=rates[0], text_rate=rates[1], image_mean=means[0], text_mean=means[1])

