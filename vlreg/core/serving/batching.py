"""The run state of a trace (`Run`), and each invoke's part of a value laid out otherwise
than along the batch.

`Run` is what the host knows of a trace's batch before the model runs; the model holds
one (`Standard.run` reads it from any envoy), made anew for every trace. Several invokes
share one batch, each its own rows (`vlreg.core.images.invokes` combines invokes that
carry images). nnsight hands an invoke its rows of a value whose leading axis is the
batch. A value laid out otherwise says how (`value`'s ``layout``), and is served whole and
cut here:

* ``"batch"``: the leading axis is the batch (nnsight narrows it);
* ``"tokens"``: the batch's rows flattened, ``[batch * seq, ...]`` (a routed MLP's tokens);
* ``"image_tokens"``: every row's image tokens in mask order (``vision.image_features``,
  DeepStack's additions): an invoke gets its rows' image tokens;
* ``"video_tokens"``: the same over the video tokens (``vision.video_features``);
* ``"rows"``: the batch, served from a tensor nnsight cannot narrow (a cross-attention
  model's states, natively ``[batch * images * tiles, ...]``, served ``[batch, ...]``):
  an invoke gets its rows;
* ``"streams"``: several parallel streams of the batch, ``[streams, batch, ...]`` (a block
  that carries several, `vlreg.core.envoys.streams`): an invoke gets its rows of every
  stream, the second axis;
* ``"tower"``: the tower's own batch (images, crops, or one packed row of patches): whole
  for the one invoke whose images it ran on; with images in several invokes it is
  unavailable (which rows are whose is the family's layout, and no family declares it).
* ``"whole"``: tokens of the whole batch in an order of the model's own (the tokens one bank
  of experts took, `vlreg.core.envoys.modality`): served to a trace of one invoke, refused
  with several (no invoke's rows are cut from it).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from attrs import field, frozen

LAYOUTS = ("batch", "tokens", "image_tokens", "video_tokens", "rows", "streams", "tower", "whole")


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
    #: Whether the run replays a cached tower output (`TowerCache.replay`): the tower does not run.
    replaying: bool = False
    #: How many video tokens each row holds (``None``: the input carries no ids, or the model
    #: no video token).
    video_tokens: torch.Tensor | None = None

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

    def videos_in(self, group: Sequence[int] | None) -> bool | None:
        """Whether ``group``'s rows (the whole batch for ``None``) hold video tokens."""
        if self.video_tokens is None:
            return None
        rows = self.video_tokens if group is None else self.video_tokens[group[0] : group[0] + group[1]]
        return bool(rows.sum() > 0)

    def invokes_with_images(self) -> int:
        return sum(bool(self.images_in(group)) for group in self.groups)

    def invokes_with_videos(self) -> int:
        return sum(bool(self.videos_in(group)) for group in self.groups)


def run_of(kwargs: dict, mask: Callable[..., torch.Tensor | None] | None, groups: Sequence, generating: bool = False,
           videos: bool = False) -> Run:
    """The `Run` of the model call nnsight assembled (``generating``: by ``generate``);
    ``mask(kwargs, video=...)`` finds the image's (the video's) tokens (`Entry.token_mask`),
    ``None`` where none can be found; ``videos``: whether a prompt can hold a video."""
    ids = kwargs.get("input_ids")
    rows = sum(size for _, size in groups)
    for name in ("input_ids", "inputs_embeds", "attention_mask"):
        if isinstance(kwargs.get(name), torch.Tensor):
            rows = kwargs[name].shape[0]
            break
    images = mask(kwargs) if ids is not None and mask is not None else None
    if images is None:
        return Run(None, tuple(groups), dict(kwargs), rows, generating)
    video_tokens = mask(kwargs, video=True).sum(-1) if videos else None
    return Run(images.sum(-1), tuple(groups), dict(kwargs), rows, generating, video_tokens=video_tokens)


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
    if layout == "streams":
        return whole[:, start : start + size]
    if layout in ("image_tokens", "video_tokens"):
        counts = run.image_tokens if layout == "image_tokens" else run.video_tokens
        if counts is None:
            return whole
        offset = int(counts[:start].sum())
        return whole[offset : offset + int(counts[start : start + size].sum())]
    return whole


def splice(layout: str, whole: Any, group: Sequence[int], run: Run, new: Any) -> Any:
    """``whole`` with ``group``'s part replaced by ``new`` (a copy)."""
    if isinstance(whole, (list, tuple)):
        return [splice(layout, each, group, run, part) for each, part in zip(whole, new)]
    if layout not in ("tokens", "image_tokens", "video_tokens", "rows", "streams"):
        return new
    spliced = whole.clone()
    part = select(layout, spliced, group, run)
    part[...] = new
    return spliced
