"""Several invokes in one trace, images included: one batch, each invoke its own rows.

nnsight batches invokes whose input is text and refuses ones that carry images (the
processor must see every prompt and every image at once to pad them). vlreg combines
them itself: every invoke's prompts, one row each, in invoke order, and each prompt's
images as a nested list (``images=[[...], [], [...]]``), through the processor with
padding on the tokenizer's side (the left, for these decoders). Each invoke then owns the
batch rows nnsight gave it. Every row must hold as many tokens as the invoke's own
encoding gives it: where the nested list changes how the processor expands a prompt's
images (LLaVA-OneVision does not tile an image that shares its list), the images go as
one flat list, and where neither form agrees with every invoke, the trace is refused.

nnsight hands an invoke its rows of a value whose leading axis is the batch. A value laid
out otherwise says how (`value`'s ``layout``), and is served whole and cut here:

* ``"batch"``: the leading axis is the batch (nnsight narrows it);
* ``"tokens"``: the batch's rows flattened, ``[batch * seq, ...]`` (a routed MLP's tokens);
* ``"image_tokens"``: every row's image tokens in mask order (``vision.image_features``,
  DeepStack's additions): an invoke gets its rows' image tokens;
* ``"rows"``: the batch, served from a tensor nnsight cannot narrow (a cross-attention
  model's states, natively ``[batch * images * tiles, ...]``, served ``[batch, ...]``):
  an invoke gets its rows;
* ``"tower"``: the tower's own batch (images, crops, or one packed row of patches): whole
  for the one invoke whose images it ran on; with images in several invokes it is
  unavailable (which rows are whose is the family's layout, and no family declares it).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from attrs import field, frozen

from .inputs import MEDIA

LAYOUTS = ("batch", "tokens", "image_tokens", "rows", "tower")


@frozen
class Run:
    """What the host knows of a trace's batch before the model runs: how many image tokens
    each row holds (``None`` when the input carries no ids, or the model no image token),
    each invoke's rows, the keyword inputs the model is called with (the processor's
    encoding: a family reads each image's grid there, Pixtral's ``image_sizes``) and the
    batch's rows (``rows``), counted from the inputs whatever they hold: cutting a value
    to an invoke's rows must not depend on images."""

    image_tokens: torch.Tensor | None
    groups: tuple = ()
    inputs: dict = field(factory=dict, eq=False, repr=False)
    rows: int = 0
    #: Whether the run is a ``generate`` (several steps), not one forward.
    generating: bool = False

    @property
    def total(self) -> int:
        """The batch's rows (0 before any run)."""
        return self.rows

    def images_in(self, group: Sequence[int] | None) -> bool | None:
        """Whether ``group``'s rows (the whole batch for ``None``) hold image tokens."""
        if self.image_tokens is None:
            return None
        rows = self.image_tokens if group is None else self.image_tokens[group[0] : group[0] + group[1]]
        return bool(rows.sum() > 0)

    def invokes_with_images(self) -> int:
        return sum(bool(self.images_in(group)) for group in self.groups)


def run_of(kwargs: dict, image_token_id: int | None, groups: Sequence, generating: bool = False) -> Run:
    """The `Run` of the model call nnsight assembled (``generating``: by ``generate``)."""
    ids = kwargs.get("input_ids")
    rows = sum(size for _, size in groups)
    for name in ("input_ids", "inputs_embeds", "attention_mask"):
        if isinstance(kwargs.get(name), torch.Tensor):
            rows = kwargs[name].shape[0]
            break
    if ids is None or image_token_id is None:
        return Run(None, tuple(groups), dict(kwargs), rows, generating)
    return Run((ids == image_token_id).sum(-1), tuple(groups), dict(kwargs), rows, generating)


def combine(processor: Any, invokes: list, options: dict | None = None) -> list:
    """Several invokes, at least one carrying images, as one invoke of a padded encoding
    (with the processor's ``options``); other inputs are left to nnsight."""
    options = options or {}
    if len(invokes) < 2 or not any(kwargs.keys() & MEDIA for _, kwargs in invokes):
        return invokes
    texts: list = []
    images: list = []
    alone: list = []
    rest: dict = {}
    for inputs, kwargs in invokes:
        prompts = inputs[0] if inputs else kwargs.get("text")
        if not isinstance(prompts, (str, list, tuple)):
            raise ValueError(
                "invokes that carry images take prompts as text (a string, or a list of strings): "
                f"got {type(prompts).__name__}"
            )
        given = kwargs.get("images")
        alone += _lengths(processor(text=prompts, images=given, **options, padding=True, return_tensors="pt"))
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        per_prompt = _per_prompt(given, len(prompts))
        texts += prompts
        images += per_prompt
        rest.update({key: value for key, value in kwargs.items() if key not in MEDIA | {"text"}})
    flat = [image for each in images for image in each]
    for form in (images, flat) if any(len(each) > 1 for each in images) else (images,):
        encoding = processor(text=texts, images=form, **options, padding=True, return_tensors="pt")
        if _lengths(encoding) in (None, alone):
            return [((), {**encoding, **rest})]
    raise ValueError(
        "the processor encodes these invokes' images differently together than each invoke alone "
        "(LLaVA-OneVision tiles an image only when it is its prompt's one image in a list per "
        "prompt): trace the invokes one at a time"
    )


def _lengths(encoding: Any) -> list | None:
    """Each row's tokens, padding left out: how the processor expanded its images."""
    mask = encoding.get("attention_mask")
    return None if mask is None else mask.sum(-1).tolist()


def _per_prompt(images: Any, prompts: int) -> list:
    """An invoke's ``images=`` as a list per prompt: one prompt takes them all; several
    take a nested list (one list per prompt), as the processor does."""
    if images is None:
        return [[] for _ in range(prompts)]
    images = list(images) if isinstance(images, (list, tuple)) else [images]
    if prompts == 1:
        return [images if not (images and isinstance(images[0], (list, tuple))) else list(images[0])]
    if len(images) != prompts or not all(isinstance(each, (list, tuple)) for each in images):
        raise ValueError(
            f"an invoke of {prompts} prompts takes images= as a list per prompt ({prompts} lists, [] for a "
            f"prompt with none), so each image lands in its own prompt"
        )
    return [list(each) for each in images]


def select(layout: str, whole: Any, group: Sequence[int], run: Run) -> Any:
    """``group``'s part of a value served whole (a tensor, or a list of them)."""
    if isinstance(whole, (list, tuple)):
        return [select(layout, each, group, run) for each in whole]
    start, size = group
    if run.total == 0:
        return whole
    if layout == "tokens":
        seq = whole.shape[0] // run.total
        return whole[start * seq : (start + size) * seq]
    if layout == "rows":
        return whole[start : start + size]
    if layout == "image_tokens":
        if run.image_tokens is None:
            return whole
        offset = int(run.image_tokens[:start].sum())
        return whole[offset : offset + int(run.image_tokens[start : start + size].sum())]
    return whole


def splice(layout: str, whole: Any, group: Sequence[int], run: Run, new: Any) -> Any:
    """``whole`` with ``group``'s part replaced by ``new`` (a copy)."""
    if isinstance(whole, (list, tuple)):
        return [splice(layout, each, group, run, part) for each, part in zip(whole, new)]
    if layout not in ("tokens", "image_tokens", "rows"):
        return new
    spliced = whole.clone()
    part = select(layout, spliced, group, run)
    part[...] = new
    return spliced
