"""`PackedVisionAttention`: a tower attention over every image packed into one row, each
image attending only to its own patches through a block-diagonal mask (Pixtral's).

One call of the attention function spans every image, so its scores and pattern are one
``[1, heads, patches, patches]`` tensor whose entries between images are masked out.
They are served per image: a list with one ``[heads, n, n]`` per image over its ``n``
patches, in the row's order, each a view of its block on the diagonal, so in-place
edits land; an assignment takes such a list and writes each block back. The entries
between images are not served: the mask keeps them out (0 in the pattern). How many
patches each image has the family says from the inputs the model was called with
(`PackedVisionAttention.image_patches`, read off `Run.inputs`), never from the values.
"""

from __future__ import annotations

from typing import Any

import torch

from ..serving.values import value
from .text import _inside_call, eager_only
from .patches import VisionAttention


def _spans(attention: "PackedVisionAttention", patches: int) -> list[tuple[int, int]]:
    counts = attention.image_patches(attention.run.inputs)
    if sum(counts) != patches:
        raise ValueError(
            f"{attention.label('attention_probabilities')}: the family counts {counts} patches per image "
            f"({sum(counts)} in all), but the tower's row holds {patches}"
        )
    ends = torch.tensor(counts).cumsum(0).tolist()
    return list(zip([0, *ends[:-1]], ends))


def _blocks(attention: "PackedVisionAttention", whole: torch.Tensor) -> list[torch.Tensor]:
    return [whole[0, :, start:end, start:end] for start, end in _spans(attention, whole.shape[-1])]


def _put(attention: "PackedVisionAttention", whole: torch.Tensor, new: list) -> torch.Tensor:
    rebuilt = whole.clone()
    for (start, end), block in zip(_spans(attention, whole.shape[-1]), new, strict=True):
        rebuilt[0, :, start:end, start:end] = block
    return rebuilt


def _scores(attention: Any, raw: Any) -> list[torch.Tensor]:
    args, kwargs = raw
    return _blocks(attention, args[0])


def _put_scores(attention: Any, raw: Any, new: list) -> Any:
    args, kwargs = raw
    return (_put(attention, args[0], new), *args[1:]), kwargs


class PackedVisionAttention(VisionAttention):
    """A tower block's attention over images packed in one row, within each image only:
    ``attention_scores`` and ``attention_probabilities`` are lists, one ``[heads, n, n]``
    per image. A family subclasses it and says how many patches each image has."""

    refuses = dict.fromkeys(("attention_scores", "attention_probabilities"), eager_only)
    attention_scores = value(
        _inside_call("nn_functional_softmax_0.input"),
        description="per image, the scores among its patches before the softmax, [heads, n, n] each",
    )(_scores).writes(_put_scores)
    attention_probabilities = value(
        _inside_call("nn_functional_dropout_0.output"),
        description="per image, the pattern among its patches, [heads, n, n] each",
    )(lambda attention, raw: _blocks(attention, raw)).writes(lambda attention, raw, new: _put(attention, raw, new))

    def image_patches(self, inputs: dict) -> list[int]:
        """Each image's patches in the packed row, in order, from the model's keyword
        inputs (the processor's encoding)."""
        raise NotImplementedError(f"{type(self).__name__} must say how many patches each image has")
