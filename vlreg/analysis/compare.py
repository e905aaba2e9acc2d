"""Comparing two models' streams block by block on the same text."""

from __future__ import annotations

from typing import Any

import torch

from ..core.errors import Unavailable
from ..core.remote import remotely


def compare_streams(model_a: Any, model_b: Any, prompt: str, *, remote: Any = False) -> torch.Tensor:
    """The cosine similarity of the two models' streams after each block, ``[layers]``,
    averaged over the prompt's positions: a vision-language model's text model against
    the base model it came from, or a model against an edited copy. Both must tokenize
    ``prompt`` alike and have as many blocks. With ``remote=``, each model's streams are
    read where that model is served (a request per model)."""
    if model_a.num_layers != model_b.num_layers:
        raise ValueError(f"the models have {model_a.num_layers} and {model_b.num_layers} blocks")
    for model in (model_a, model_b):
        reason = _no_text_alone(model, prompt)
        if reason:
            raise Unavailable(f"compare_streams is unavailable: {reason}")
    streams = [_streams(model, prompt, remote=remote) for model in (model_a, model_b)]
    if streams[0].shape != streams[1].shape:
        raise ValueError(
            f"the models read the prompt as {streams[0].shape[1]} and {streams[1].shape[1]} tokens: "
            "compare them on text both tokenize alike"
        )
    return torch.nn.functional.cosine_similarity(streams[0], streams[1], dim=-1).mean(-1)


def _no_text_alone(model: Any, prompt: str) -> str | None:
    """Why ``model`` runs no prompt without an image (``None``: it does), asked before any
    trace: its wrapper runs the tower on every forward, or its processor takes no text alone."""
    entry = model.family.entry
    if entry is not None and entry.needs_images:
        return (f"the {model.family.name!r} family's {type(model._module).__name__} runs its vision tower on every "
                f"forward, so it runs no prompt without an image")
    processor = model.processor
    if processor is None or getattr(processor, "image_processor", None) is None:
        return None
    try:
        processor(text=[prompt])
    except ValueError as error:
        return (f"the {model.family.name!r} family's processor takes no prompt without an image ({error}); "
                f"load it with task='text-generation', which reads the prompt with its tokenizer alone")
    return None


@remotely()
def _streams(model: Any, prompt: str) -> torch.Tensor:
    saved: list = []
    with torch.no_grad(), model.trace(prompt):
        for block in model.layers:
            saved.append(block.layer_output[0].save())
    return torch.stack([stream.detach().double() for stream in saved])
