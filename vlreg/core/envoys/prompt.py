"""The root's values of the prompt: the ids and mask the model is called with, and the
token embeddings before anything is scattered into them (where the model adds into the
looked-up rows in place, `Prefix.embeddings_in_place`, it goes on with a copy of them).

``input_ids`` can be written, but an edit that moves an image token is refused: the model
writes each image's features at the prompt's image tokens, as many as its images make.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import Unavailable
from ..serving.sites import model_inputs
from ..serving.values import returned, value


def _model_input(raw: Any, name: str) -> torch.Tensor:
    args, kwargs = raw
    found = kwargs.get(name, args[0] if name == "input_ids" and args else None)
    if found is None:
        raise Unavailable(f"{name} is unavailable: the model was called without it")
    return found


def _with_model_input(raw: Any, name: str, new: torch.Tensor, model: Any = None) -> Any:
    args, kwargs = raw
    old = _model_input(raw, name)
    if new.shape != old.shape:
        raise ValueError(f"{name} keeps its shape {tuple(old.shape)} in a trace, not {tuple(new.shape)}")
    moved, which = _moved_image_tokens(model, raw, old, new) if name == "input_ids" else (None, None)
    if moved is not None and moved.any():
        where = moved.nonzero()[:, -1].unique().tolist()
        raise ValueError(
            f"the new input_ids move image tokens ({which}) at positions {where}: the model writes each "
            f"image's features at the prompt's image tokens, as many as its images make, so the run would fail "
            f"or misplace them. Keep every image token where it is (change text tokens only), or edit the prompt "
            f"and its images; to change what an image contributes, edit vision.image_features"
        )
    if name == "input_ids" and args and "input_ids" not in kwargs:
        return (new, *args[1:]), kwargs
    return args, {**kwargs, name: new}


def _moved_image_tokens(model: Any, raw: Any, old: torch.Tensor, new: torch.Tensor) -> tuple:
    """Where ``new`` ids move an image token from ``old``'s, and how the tokens are told: by
    their id, or, where a processor output marks them (`Entry.marks`), any change at a marked one."""
    entry = getattr(getattr(model, "family", None), "entry", None)
    if entry is not None and entry.marks is not None:
        marked = entry.token_mask(model, {**raw[1], "input_ids": old})
        return marked & (new != old), f"marked by {entry.marks}"
    image_token = getattr(model, "image_token_id", None)
    if image_token is None:
        return None, None
    return (new == image_token) != (old == image_token), f"id {image_token}"


input_ids = value(model_inputs, description="the prompt's token ids, [batch, seq]")(
    lambda model, raw: _model_input(raw, "input_ids")
).writes(lambda model, raw, new: _with_model_input(raw, "input_ids", new, model))
attention_mask = value(
    model_inputs, description="1 at the prompt's tokens, 0 at padding, [batch, seq]"
)(lambda model, raw: _model_input(raw, "attention_mask")).writes(
    lambda model, raw, new: _with_model_input(raw, "attention_mask", new)
)
def _in_place(model: Any) -> bool:
    return getattr(model.family.entry, "embeddings_in_place", False)


token_embeddings = returned(
    lambda model: f"{model.embed_tokens.path}.output",
    description="the token embeddings, before anything is scattered into them",
)
# where the model adds into the looked-up rows in place, it goes on with a copy of them, so the
# served rows stay as looked up (and edits made to them before the model moves on land in the copy)
token_embeddings.transform(lambda model, view, raw: view.clone() if _in_place(model) else view)
