"""Tower values over patches: `Patches`, the `patches` value, and the tower's block classes
(`VisionLayer`, `VisionAttention`, `VisionMlp`), the text block's values over patches.

A tower that runs on ``[patches, vision_hidden_size]`` with every image in one row (the
Qwen ViT) is served through the same classes: `as_patches` gives the native tensor a
leading axis of 1 as a view, so in-place edits land, and an assignment is reshaped back to
the native layout.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..serving.values import first, value, with_first
from .text import Attention, Layer, Mlp

Patches = torch.Tensor
"""``[images, patches, vision_hidden_size]``; ``[1, patches, vision_hidden_size]`` on a
tower that packs every image into one row."""


def as_patches(tensor: torch.Tensor) -> Patches:
    """A packed ``[patches, hidden]`` tensor as ``[1, patches, hidden]`` (a view)."""
    return tensor.unsqueeze(0) if tensor.dim() == 2 else tensor


def patches(
    at: "str | Callable[[Any], str]" = "output",
    read: Callable[[Any], torch.Tensor] = first,
    put: Callable[[Any, torch.Tensor], Any] = lambda raw, new: with_first(None, raw, new),
    **options: Any,
) -> value:
    """A tower stream value: ``read(raw)`` served as `Patches`; an assignment is reshaped
    to the native layout and handed to ``put(raw, new)``, which returns what the model
    should hold."""
    return value(at, **options)(lambda envoy, raw: as_patches(read(raw))).writes(
        lambda envoy, raw, new: put(raw, new.reshape(read(raw).shape))
    )


class VisionLayer(Layer):
    """A tower block: the text block's values over patches."""

    layer_output = patches(description="the stream leaving the block, [images, patches, hidden]")


class VisionAttention(Attention):
    """A tower block's attention: the text attention's values over patches.

    The interior is inherited: ``attention_probabilities`` is a pattern over the
    patches, with no causal mask.
    """

    attention_output = patches(description="what the attention adds to the stream, [images, patches, hidden]")


class VisionMlp(Mlp):
    """A tower block's MLP over patches."""

    mlp_output = patches(description="what the MLP adds to the stream, [images, patches, hidden]")
