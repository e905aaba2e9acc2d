"""`Prefix`: the image's tokens go before the prompt's, an `Entry` of its own (GIT's).

Kept apart from `vlreg.core.images.entries`, whose entries write the image over placeholder
tokens the prompt holds: here the prompt holds none, and the blocks' sequence is longer than
the prompt by the image's tokens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import torch
from attrs import frozen

from .entries import Entry
from .processing import leaves


def _joined(raw: Any) -> tuple:
    """The pieces the concatenation joins, as its call holds them: ``(args, kwargs)``."""
    args, kwargs = raw
    return tuple(args[0] if args else kwargs["tensors"])


def _with_joined(raw: Any, pieces: tuple) -> Any:
    args, kwargs = raw
    if args:
        return (pieces, *args[1:]), kwargs
    return args, {**kwargs, "tensors": pieces}


@frozen
class Prefix(Entry):
    """The wrapper puts the image's tokens before the prompt's token embeddings, with no
    placeholder in the prompt: the blocks run over ``[image tokens, prompt tokens]``.

    ``host`` is the module (path from the root) whose forward joins them, ``operation``
    nnsight's name for the ``torch.cat`` there (GIT's ``torch_cat_1`` in ``git``), the
    image's part its first piece. ``tokens(config, inputs)`` is how many tokens the image
    puts before a prompt, from the checkpoint's config and the model's keyword inputs (the
    processor's ``pixel_values``). So:

    * ``vision.image_token_mask`` is over the blocks' positions, ``[batch, image tokens +
      seq]``, True at the prefix (which ``input_ids`` never hold), all False without an image;
    * ``vision.image_features`` is the prefix, a row a token, read and written where it is
      joined: ``layers[0].input[image_token_mask] == image_features``;
    * ``token_embeddings`` are the looked-up rows; ``embeddings`` names the module (a path
      from the root) that makes the prompt's part of the stream of them, where it adds more
      (GIT's adds position embeddings and a norm before the join), so
      ``layers[0].input[~image_token_mask]`` is what `along` makes of ``token_embeddings``.
    """

    host: str
    operation: str
    #: The prompt holds none of the image's tokens (no placeholder to count, move or write).
    in_prompt = False
    tokens: Callable[[Any, Mapping], int]
    embeddings: str | None = None
    #: Whether ``embeddings`` adds into the looked-up rows in place (GIT's ``+=``), which
    #: would leave ``token_embeddings`` holding the sum once read: the model then goes on
    #: with a copy of the rows, so the served ones stay as looked up.
    embeddings_in_place: bool = False
    order: tuple[str, ...] = ("token_embeddings", "vision")
    words = "where the features are put before the prompt's embeddings"

    def token_mask(self, model: Any, inputs: Mapping, video: bool = False) -> torch.Tensor | None:
        ids = inputs.get("input_ids")
        if ids is None:
            return None
        text = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
        if video or inputs.get("pixel_values") is None:
            return text
        count = int(self.tokens(model._module.config, inputs))
        return torch.cat([torch.ones(ids.shape[0], count, dtype=torch.bool, device=ids.device), text], 1)

    def check_invokes(self, model: Any, invokes: list) -> None:
        """Also refuse prompts that do not carry one image each: the forward puts the one
        batch of projected images before every prompt's embeddings (repeated to the prompts'
        count), so a prompt without an image would read another's, and a prompt of two
        images would join them to other prompts."""
        super().check_invokes(model, invokes)
        prompts, images = 0, 0
        for inputs, kwargs in invokes:
            given = inputs[0] if inputs else kwargs.get("text")
            prompts += len(given) if isinstance(given, (list, tuple)) else 1
            images += len(list(leaves(kwargs["images"]))) if kwargs.get("images") is not None else 0
        if images:
            _one_image_each(model, images, prompts)

    def place(self, model: Any, encoding: Any, declared: list, images: list) -> list:
        _one_image_each(model, len(images), int(encoding["input_ids"].shape[0]))
        return super().place(model, encoding, declared, images)

    def shifted(self, positions: torch.Tensor, shift: int) -> torch.Tensor:
        """Unmoved: the image's tokens precede the prompt and any padding of it."""
        return positions

    def along(self, model: Any, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The prompt's embeddings at the blocks' positions, after the image's (zeros there),
        as ``embeddings`` (the module) makes them of the token embeddings."""
        if self.embeddings is not None:
            embeddings = model.get(self.embeddings)._module(inputs_embeds=embeddings.clone())
        prefix = mask.shape[1] - embeddings.shape[1]
        return torch.cat([embeddings.new_zeros(embeddings.shape[0], prefix, embeddings.shape[-1]), embeddings], 1)

    def features_at(self, vision: Any) -> str:
        return f"{self.host_envoy(vision.root).path}.source.{self.operation}.input"

    def features_inside(self, vision: Any) -> Any:
        return self.host_envoy(vision.root)

    def native_features(self, vision: Any, raw: Any) -> Any:
        return _joined(raw)[0]

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        features = self.native_features(vision, raw)
        return features.reshape(-1, features.shape[-1])

    def write_features(self, vision: Any, raw: Any, new: torch.Tensor) -> Any:
        pieces = _joined(raw)
        return _with_joined(raw, (new.reshape(pieces[0].shape), *pieces[1:]))


def _one_image_each(model: Any, images: int, prompts: int) -> None:
    if images != prompts:
        raise ValueError(
            f"{images} image{'s were' if images != 1 else ' was'} given for {prompts} prompt"
            f"{'s' if prompts != 1 else ''}: the {model.family.name!r} family puts one image's tokens before "
            f"each prompt (its prompts hold no image placeholder), and the forward shares one batch of images "
            f"among all its prompts; pass one image per prompt, or trace the prompts without images apart"
        )
