"""`Injections`: the entry of an image whose features are added to the text stream before
several text blocks, with no scatter into the embeddings (Granite 4 Vision)."""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from .arguments import _shares_storage
from .scatter import Scatter


@frozen
class Injections(Scatter):
    """The wrapper zeroes the embeddings at the image tokens and hands the text model one set
    of features per mapped text block; the text model's loop, before each such block, adds
    that block's set at the image tokens, from one call site (``host`` is the text model,
    ``operation`` the call whose output is one block's set, ``deepstack_features_to_0`` on
    Granite 4 Vision: call ``k`` is the ``k``-th mapped block's, in block order).

    * ``vision.image_features`` is what the first injection adds, ``[image_tokens, hidden]``,
      read at that call's first output; a write replaces what it adds. The later injections
      are the text blocks' own values (the family's, by occurrence of the same call).
    * Where the first injection is before block 0 (onto the zeros), ``layers[0].input[mask] ==
      image_features`` (where it is before a later block, the features first enter at that
      block's input and block 0 receives zeros there); elsewhere block 0 receives the token
      embeddings times ``scale`` (a field of the text config the text model multiplies its
      embeddings by, Granite's ``embedding_multiplier``; ``None``: not scaled), which the
      conformance suite asks the entry (`scale_of`).
    """

    #: The text config's field the text model multiplies every embedding by before block 0.
    scale: str | None = None
    #: Why an image token is not a patch or a block of patches of the tower (`Entry.not_patches`;
    #: Granite 4 Vision's are a windowed Q-Former's queries); ``None``: it is one.
    not_patches_reason: str | None = None

    def not_patches(self) -> str | None:
        return self.not_patches_reason

    def scale_of(self, model: Any) -> float:
        """The factor block 0 receives the token embeddings times, outside the image tokens."""
        return 1.0 if self.scale is None else float(getattr(model._module.config.get_text_config(), self.scale))

    def features_at(self, vision: Any) -> str:
        return f"{vision.root.path}.{self.host}.source.{self.operation}.output"

    def native_features(self, vision: Any, raw: Any) -> Any:
        return raw

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        return raw.reshape(-1, raw.shape[-1])

    def write_features(self, vision: Any, raw: Any, new: torch.Tensor) -> Any:
        return new.reshape(raw.shape)

    def views_features(self, vision: Any, raw: Any, served: torch.Tensor) -> bool:
        return _shares_storage(served, raw)
