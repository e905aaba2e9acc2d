"""`CrossAttention`: the image reaches the text model by cross-attention, an `Entry` of
its own (Mllama's). Kept apart from `vlreg.core.images.entries`, whose entries all write
the image into the token stream."""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from ..errors import Unavailable
from .entries import Entry
from .geometry import ImageGeometry


@frozen
class CrossAttention(Entry):
    """The image reaches the text model by cross-attention, not through its token stream.

    Mllama's wrapper hands the projected tower output to the text model as a keyword
    argument (``cross_attention_states``); no feature is written into the embeddings, and
    only the blocks built to cross-attend read it, each projecting it to its own keys and
    values. ``host`` is the text model (path from the model root) and ``argument`` the
    keyword (or position) it takes the states by: `Vision.image_features` is read there,
    ``[batch, positions, hidden]``, so an edit reaches every cross-attention block and no
    block is touched before the first of them.
    """

    host: str
    argument: int | str = "cross_attention_states"
    #: The wrapper runs the tower before it calls the text model, whose forward embeds the
    #: tokens, so the embeddings come after the image's values.
    order: tuple[str, ...] = ("vision", "token_embeddings")
    #: Where the host makes the states itself (IDEFICS's text model runs the tower and the
    #: perceiver in its own forward): the operation in the host's forward whose output they
    #: are, read and written there, so an edit reaches every cross-attention block. Several
    #: names: the first the host's forward has, where transformers versions name it apart
    #: (``("image_hidden_states_view_1", "image_hidden_states_view_0")``: 5.23's forward has
    #: an earlier ``.view`` in a branch, 5.25's only the one). ``None``: read at ``argument``.
    operation: str | tuple[str, ...] | None = None
    #: Whether the host's forward needs an image on every call (`Entry.needs_images`).
    needs_images: bool = False
    #: Where the placeholder's id is (``"config"``: the config field `Entry.token`;
    #: ``"processor"``: the processor's attribute of that name, where the config has none,
    #: as on IDEFICS, whose processor writes the placeholders itself).
    token_on: str = "config"
    words = "the states the text model's cross-attention blocks read"
    features_layout = "rows"

    def not_in_stream(self) -> str | None:
        return "image reaches the text model by cross-attention, with no tokens in the text stream"

    def of_image(self, features: torch.Tensor, image: ImageGeometry) -> torch.Tensor:
        """``image``'s positions in its row of the states."""
        return features[image.row, image.features]

    def operation_in(self, vision: Any) -> str:
        """The name of ``operation`` in the host's forward (the first of the names it has)."""
        from nnsight.intervention.source import install_source

        names = (self.operation,) if isinstance(self.operation, str) else self.operation
        found = install_source(self.host_envoy(vision.root)).names
        for name in names:
            if name in found:
                return name
        raise TypeError(f"the forward of model.{self.host} has no operation {' or '.join(names)}: the family's "
                        "CrossAttention names where the states are made for another transformers version")

    def features_at(self, vision: Any) -> str:
        if self.operation is None:
            return super().features_at(vision)
        return f"{self.host_envoy(vision.root).path}.source.{self.operation_in(vision)}.output"

    def features_inside(self, vision: Any) -> Any:
        return None if self.operation is None else self.host_envoy(vision.root)

    def native_features(self, vision: Any, raw: Any) -> Any:
        return super().native_features(vision, raw) if self.operation is None else raw

    def write_features(self, vision: Any, raw: Any, new: torch.Tensor) -> Any:
        return super().write_features(vision, raw, new) if self.operation is None else new.reshape(raw.shape)

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        if self.operation is not None:  # made by the host itself: [batch, positions, width] already
            return raw
        states = self.native_features(vision, raw)
        if states is None:
            raise Unavailable(
                "vision.image_features is unavailable: the text model was called without the image's states, "
                "as at a generation step after the first, where the cross-attention blocks read the keys and "
                "values they cached; read the features at the first step (before tracer.iter)"
            )
        args, kwargs = raw
        ids = kwargs.get("input_ids", args[0] if args else None)
        batch = (ids if ids is not None else kwargs["inputs_embeds"]).shape[0]
        return states.reshape(batch, -1, states.shape[-1])

    def check_invokes(self, model: Any, invokes: list) -> None:
        """Also refuse a batch whose prompts do not all carry images: the text model runs
        its cross-attention blocks for every row once any row has images, so a prompt
        without one would attend to the padding of the others' states (its run alone skips
        those blocks), and Mllama's processor gives such a batch inconsistent inputs."""
        super().check_invokes(model, invokes)
        carrying = []
        for inputs, kwargs in invokes:
            prompts = inputs[0] if inputs else kwargs.get("text")
            count = len(prompts) if isinstance(prompts, (list, tuple)) else 1
            images = kwargs.get("images")
            if images is None:
                carrying += [False] * count
            elif count > 1 and isinstance(images, (list, tuple)) and all(isinstance(each, (list, tuple)) for each in images):
                carrying += [len(each) > 0 for each in images]
            else:
                carrying += [True] * count
        if any(carrying) and not all(carrying):
            raise ValueError(
                f"the {model.family.name!r} family reads images by cross-attention, and its text model runs "
                "the cross-attention blocks for every prompt of a batch once one carries images: a prompt "
                "without an image would attend to the others' padding instead of skipping them, as it does "
                "alone. Trace the prompts without images apart from those with images."
            )

    def place(self, model: Any, encoding: Any, declared: list, images: list) -> list[ImageGeometry]:
        """Each image's `ImageGeometry` where the image is read by cross-attention: ``row``
        is the batch row of its placeholder, ``positions`` its positions in that row of the
        states (``vision.image_features[row]``, the keys' axis), ``offset`` where they start.

        Every image of a batch gets as many positions (the processor pads tiles and images
        to the largest), so the family's grids for each must add up to the same count."""
        rows = (encoding["input_ids"] == model.image_token_id).nonzero(as_tuple=True)[0].tolist()
        if len(rows) != len(images):
            raise ValueError(f"the prompt holds {len(rows)} image placeholders, but {len(images)} images were given")
        counts = {sum(grid.tokens for grid in grids) for grids in declared}
        if len(counts) != 1:
            raise ValueError(
                f"the family's grids give the images different numbers of positions ({sorted(counts)}), "
                "but the states hold as many for every image"
            )
        (count,) = counts
        found = []
        for index, (grids, row, image) in enumerate(zip(declared, rows, images)):
            offset = rows[:index].count(row) * count
            found.append(ImageGeometry(index=index, row=row, positions=torch.arange(offset, offset + count),
                                       grids=grids, size=tuple(image.size), offset=offset))
        return found
