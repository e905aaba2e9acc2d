"""Gradient-weighted attention relevancy (Chefer et al. 2021): how much each image token is
relevant to a metric at one position, through the text blocks' attention.

Starting from the identity, each attending block ``l`` in forward order updates the
relevancy ``R <- R + mean_heads(max(0, dM/dA_l * A_l)) @ R``, where ``A_l`` is its pattern and
``dM/dA_l`` the metric's gradient with respect to it (one forward, one backward, `.grad` of
``self_attn.attention_probabilities``). The row of ``R`` at the position, cut to each image's
tokens, is the map. Blocks that mix tokens otherwise (a hybrid model's convolutions or
state-space mixers) add nothing: the rule follows attention only, as its authors' does.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from attrs import frozen

from ..core.errors import Unavailable
from ..core.images.geometry import ImageGeometry
from ..core.images.options import takes_processor_options
from ..core.remote import remotely
from .tokens import _images, in_stream, token_id, warn_if_turn_ended

Metric = Callable[[torch.Tensor], torch.Tensor]


@frozen
class Relevancy:
    """The relevancy of every token to the metric at ``position`` of batch row ``row`` (by
    default the ``target`` logit, by default the likeliest token): per image, ``tokens``
    ``[tokens]``, at its image tokens; ``layers``: the attending blocks the rule went through;
    ``sequence``: the whole row of the relevancy, ``[seq]``."""

    layers: tuple[int, ...]
    row: int
    position: int
    target: int | None
    tokens: list[torch.Tensor]
    sequence: torch.Tensor
    geometry: list[ImageGeometry]


@remotely(gradients=True)
@takes_processor_options
def relevancy(
    model: Any,
    prompt: Any,
    images: Any,
    *,
    metric: Metric | None = None,
    target: "int | str | None" = None,
    position: int = -1,
) -> Relevancy:
    """Chefer et al.'s relevancy of each image token to ``metric`` (of the logits at
    ``position``, ``[vocab]``; by default the ``target`` logit, by default the likeliest
    token's), through every text block that attends. Needs the pattern: a load with
    ``attn_implementation="eager"``."""
    in_stream(model, "relevancy")
    warn_if_turn_ended(model, prompt, position, "relevancy")
    images = _images(images)
    blocks = model.prompt_layers
    layers = tuple(block.block_index for block in blocks if "self_attn" in block.__dict__)
    if model.attn_implementation != "eager":
        raise Unavailable(f"relevancy is unavailable: it weighs the attention pattern, which the attention running as "
                          f"{model.attn_implementation!r} never forms; load with attn_implementation='eager'")
    if not layers:
        raise Unavailable("relevancy is unavailable: no text block attends (they mix tokens otherwise)")
    geometry = model.vision.geometry(prompt, images)
    row = geometry[0].row
    chosen: list = []
    weighted: list = []  # made outside the trace: only saved names leave it
    with model.trace(prompt, images=images):
        patterns = [blocks[layer].self_attn.attention_probabilities for layer in layers]
        logits = model.logits[row, position].float()
        if metric is None:
            chosen.append(int(logits.argmax()) if target is None else token_id(model, target))
            measured = logits[chosen[0]]
        else:
            chosen.append(None)
            measured = metric(logits)
        with measured.backward(inputs=patterns):
            for pattern in reversed(patterns):  # gradients arrive from the last block back
                weighted.append((pattern[row].detach().float() * pattern.grad[row].float()).clamp(min=0).mean(0).save())
    relevance = torch.eye(weighted[0].shape[-1])
    for attention in reversed(weighted):  # forward order
        relevance = relevance + attention @ relevance
    sequence = relevance[position]
    tokens = [sequence[image.positions] if image.row == row else sequence[:0] for image in geometry]
    return Relevancy(layers=layers, row=row, position=position, target=chosen[0], tokens=tokens, sequence=sequence,
                     geometry=geometry)
