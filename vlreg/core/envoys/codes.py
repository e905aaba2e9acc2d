"""Discrete image codes: the image reaches the text model as ids, embedded as tokens are.

A family whose entry is an `ImageCodes` (Emu3, Chameleon) reads an image with a VQ
encoder: its latents are quantized to codebook ids, the ids mapped into the text
vocabulary and embedded by the text model's own embedding, in a second call of it, before
the embeddings are scattered over the placeholders. Two envoys serve that:

* `CodesVision`, the vision part, adds ``vision.image_codes``: the ids that call embeds,
  ``[image_tokens]``, one per image token in mask order (an end-of-line id too, where the
  family writes one), so ``embed_tokens.weight[image_codes] == image_features``. A write
  is embedded in their place: it moves ``image_features`` and everything after. Where the
  forward embeds each image's codes in a call of its own (`ImageCodes.per_image`), it is a
  list, an image's ids each, assigned as one. The ids
  must stay ids of the vocabulary, as many as before; other values are refused before the
  embedding runs, where an out-of-range id would fail deep inside it or a float be cast;
* `CodeEmbedding`, the text model's embedding, serves each of its calls (`PerCall`):
  ``embed_tokens.input`` and ``output`` are lists, the prompt's call, then the codes'.

Where the codes are read, and how, is the entry's to say (`Entry.codes`, their `Site`), as
the features' is.
"""

from __future__ import annotations

from typing import Any

from ..serving.values import built
from .calls import PerCall
from .vision import Vision


def _no_codes(vision: Any) -> str | None:
    entry = vision.place.entry
    if entry.codes(vision) is not None:
        return None
    return (f"the {vision.root.family.name!r} family's image reaches the text model as features ({type(entry).__name__}), "
            f"with no ids of its own; read vision.image_features")


class CodesVision(Vision):
    """A vision part that hands the text model discrete codes: the tower's values, then
    ``image_codes``, then the features at the scatter."""

    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "image_codes", "image_features")
    refuses = {"image_codes": _no_codes}

    image_codes = built(
        lambda vision: vision.place.entry.codes(vision),
        occurrence=lambda vision: vision.place.entry.codes_call,
        calls=lambda vision: vision.place.entry.codes_calls(vision.run.inputs),
        layout=lambda vision: "whole" if vision.place.entry.per_image else "image_tokens",
        description="the ids the text model embeds as the image, one per image token, [image_tokens] (a list of "
                    "them, an image's each, where the forward embeds each image's apart)",
    )


class CodeEmbedding(PerCall):
    """The text model's embedding where it also embeds an image's codes: every call served,
    the prompt's first (the entry's `ImageCodes.embedder_calls` says how many a forward
    makes; a generation's later steps embed their new tokens only)."""

    def calls(self, inputs: dict) -> int:
        from nnsight.intervention.interleaver import Mediator

        if self.run.generating and Mediator.current(self.label("output")).iteration:
            return 1
        return self.place.entry.embedder_calls(inputs)
