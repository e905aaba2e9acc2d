"""`ImageCodes`: the image reaches the text model as discrete codes, an `Entry` of its own.

Kept apart from `vlreg.core.images.entries` because it brings envoys of its own (the
embedding served per call, the codes as a tower value: `vlreg.core.envoys.codes`).
"""

from __future__ import annotations

from typing import Any

import torch
from attrs import field, frozen

from ..envoys.codes import CodeEmbedding
from ..serving.sites import Site
from .scatter import Scatter


def _codes(raw: Any) -> torch.Tensor:
    """The ids the call embeds, flattened to one per image token (a view)."""
    args, kwargs = raw
    return (args[0] if args else kwargs["input"]).reshape(-1)


def _with_codes(vision: Any, raw: Any, new: Any) -> Any:
    """``raw`` with its ids replaced by ``new``, refused unless ``new`` holds as many
    integer ids of the vocabulary as the codes."""
    args, kwargs = raw
    native = args[0] if args else kwargs["input"]
    new = torch.as_tensor(new)
    label = vision.label("image_codes")
    if new.is_floating_point() or new.is_complex() or new.dtype == torch.bool:
        raise ValueError(f"{label} are token ids: assign integer ids (a {new.dtype} tensor was given)")
    if new.numel() != native.numel():
        raise ValueError(f"{label} holds {native.numel()} ids (one per image token); {new.numel()} were given")
    size = vision.root.vocab_size
    if new.numel() and (int(new.min()) < 0 or int(new.max()) >= size):
        raise ValueError(f"{label} are ids of the text vocabulary, 0 to {size - 1}; {int(new.min())} to "
                         f"{int(new.max())} were given")
    new = new.to(device=native.device, dtype=native.dtype).reshape(native.shape)
    return ((new, *args[1:]), kwargs) if args else (args, {**kwargs, "input": new})


@frozen
class ImageCodes(Scatter):
    """The image reaches the text model as discrete codes, embedded as tokens are (Emu3,
    Chameleon): a VQ encoder's codebook ids, mapped to ids of the text vocabulary (Emu3 ends
    each row with an end-of-line id), embedded by the text model's own embedding in a second
    call of it in the forward, then scattered as any `Scatter` does (the inherited fields
    say where), so ``layers[0].input[image_token_mask] == image_features`` holds here too.

    ``embedder`` is that embedding (its path from the root), ``codes_call`` which of its
    calls embeds the codes (from 0: the prompt's ids are call 0). ``vision.image_codes``
    (`CodesVision`) is that call's input, one id per image token in mask order, so
    ``embed_tokens.weight[image_codes] == image_features``; written, the new ids are
    embedded, while an edit of the features, later, leaves the codes as they were. The
    embedding serves each of its calls (`CodeEmbedding`). ``per_image``: the forward embeds
    each image's codes in a call of its own, from ``codes_call`` on, one an image in
    ``pixel_values``' order (Apertus 1.5 tokenizes image by image); ``vision.image_codes`` is
    then a list, an image's ids each, assigned as one.
    """

    embedder: str = field(kw_only=True)
    codes_call: int = field(default=1, kw_only=True)
    per_image: bool = field(default=False, kw_only=True)
    told = {"image_codes": "the ids the text model's embedding reads"}

    def codes(self, vision: Any) -> Site:
        """The codes: the embedder's input at ``codes_call``, one id per image token (a view);
        a write is checked to be as many ids of the vocabulary, then embedded."""
        return Site(f"{vision.root.get(self.embedder).path}.input", _codes,
                    lambda raw, new: _with_codes(vision, raw, new))

    def embedder_calls(self, inputs: dict) -> int:
        """How many times one forward on ``inputs`` (the processor's encoding) calls the
        embedder: once for the prompt, and once more for the codes (once an image, where
        ``per_image``) where images are given."""
        if inputs.get("pixel_values") is None:
            return 1
        return self.codes_call + (self.codes_calls(inputs) or 1)

    def codes_calls(self, inputs: dict) -> int | None:
        """How many calls of the embedder embed codes in one forward on ``inputs``, served as a
        list (`At.calls`): one an image where ``per_image``; else ``None``, one call."""
        pixels = inputs.get("pixel_values")
        return int(pixels.shape[0]) if self.per_image and pixels is not None else None

    def envoys(self) -> dict:
        return {self.embedder: CodeEmbedding}
