"""`QueryTokens`: the entry of an image that reaches the text model as a Q-Former's learned
queries, scattered (BLIP-2, InstructBLIP, InstructBLIP-Video)."""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from .scatter import Scatter
from .geometry import ImageGrid


@frozen
class QueryTokens(Scatter):
    """The image reaches the text model as learned queries (BLIP-2's, InstructBLIP's).

    The tower's patches are read by a Q-Former: a small transformer over ``num_query_tokens``
    learned query embeddings (``query_tokens``, ``[1, queries, qformer_hidden]``) that
    cross-attend to every patch; its output at the queries is projected (``projector``, the
    ``language_projection``) to the text model's width, and the wrapper scatters those rows
    into the embeddings at the image tokens, ``num_query_tokens`` of them an image, in its
    own forward (``host=""``). So:

    * ``vision.image_features`` is the projected queries, the value the scatter writes at
      the image-token mask (``[images * queries, hidden]``), and ``projector.output`` is
      the same rows before they are flattened;
    * the Q-Former is ``model.vision.qformer`` (mounted there from ``qformer``, its path from
      the root, though the module is the tower's sibling), with its blocks at
      ``model.vision.qformer.layers[i]``: every value under it is a tower value, absent
      where no image runs;
    * the forward runs the tower, the Q-Former and the projector *before* it embeds the
      tokens, then scatters (`order`);
    * an image token stands for no part of the image: each query attends to every patch, so
      every query token's box in the geometry is the whole image (`query_grids`), and a
      helper that folds the tower's per-patch values onto the tokens refuses (`not_patches`).
    """

    order: tuple[str, ...] = ("vision", "token_embeddings", "vision.image_features")
    #: The Q-Former's path from the root; ``None``: the queries are the projector's own
    #: (Kosmos-2's latent queries), with nothing to mount.
    qformer: str | None = "qformer"

    def mount(self, model: Any) -> None:
        """Bind ``model.vision.qformer`` to the Q-Former's envoy, the same object as
        ``model.<qformer>`` (as a rename alias is), so its values count as the tower's."""
        super().mount(model)
        vision = model.__dict__.get("vision")
        if vision is not None and self.qformer is not None and "qformer" not in vision.__dict__:
            object.__setattr__(vision, "qformer", model.get(self.qformer))

    def not_patches(self) -> str | None:
        return (
            "the image tokens are learned queries (a Q-Former's, or a resampler's), each of which attends to every patch "
            "of the tower, not patches or blocks of them; read the tower's own values "
            "(model.vision.layers[i]) over its patches"
        )

    @staticmethod
    def query_grids(queries: int) -> Any:
        """``vlreg_image_grids`` for query tokens: each image is one row of ``queries``
        tokens, every one's box the whole image (each query reads every patch)."""

        def grids(encoding: Any, images: Any, processor: Any) -> list:
            return [ImageGrid(1, queries, torch.tensor([[0.0, 0.0, *image.size]] * queries), label="queries")
                    for image in images]

        return grids
