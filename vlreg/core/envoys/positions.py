"""`LearnedPositions`: a tower that adds a learned grid of position embeddings to its
patches, resampled to each image's grid of patches (SigLIP 2's, Qwen3's, PaddleOCR-VL's,
Cosmos3 Edge's, HunYuan-VL's), served as ``vision.position_embeddings``.

The grid is read where the tower computes it for the images at hand: the call that returns
the resampled grid, in the forward of the tower or of one of its modules (its embeddings).
So a write there is what the tower adds, and, where the tower adds it to the patch
embeddings and hands the sum to block 0 as it is (`positions_add_to_patches`), the
conformance suite checks ``vision.layers[0].input == patch_embeddings + position_embeddings``.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, ClassVar

from ..serving.sites import At
from ..serving.values import value
from .patches import as_patches
from .vision import Vision


def _module(vision: Any) -> Any:
    path = vision.positions_module
    return reduce(getattr, path.split("."), vision) if path else vision


def _location(vision: Any) -> str:
    return f"{_module(vision).path}.source.{vision.positions_call}.output"


class LearnedPositions(Vision):
    """A tower adding learned positions resampled per image. A family subclasses it (with
    its tower's other classes, `PackedVision` for a packed one) and names where the grid is
    computed: ``positions_module``, the module whose forward makes the call, relative to the
    tower (``"embeddings"``; ``""``: the tower's own), and ``positions_call``, nnsight's name
    of the call whose output is the resampled grid (``"self_resize_positional_embeddings_0"``,
    ``"pos_embeds_to_0"``); print ``model.vision.<module>.source`` to find it."""

    positions_module: ClassVar[str] = ""
    positions_call: ClassVar[str]
    #: Whether block 0 receives the patch embeddings plus the positions, as they are (no
    #: class token, norm or reordering in between): the suite then checks it does.
    positions_add_to_patches: ClassVar[bool] = True

    order = ("image_token_mask", "patch_embeddings", "position_embeddings", "layers", "tower_output", "image_features")

    position_embeddings = value(
        At(_location, inside=_module),
        description="the learned position grid resampled to each image, added to its patches",
    )(lambda vision, raw: as_patches(raw)).writes(lambda vision, raw, new: new.reshape(raw.shape))
