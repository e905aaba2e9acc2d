"""Where the image enters the text model: one `Entry` per way it does.

A wrapper declares its entry (`vlreg_entry`, a `Wrapper`'s ``entry=``): `Scatter` (the
features are written into the token embeddings), `QueryTokens` (a Q-Former's learned
queries, scattered), `ImageCodes` (discrete codes, embedded as tokens are, then scattered:
`vlreg.core.images.codes`) or `CrossAttention` (the text model takes them as an argument
its cross-attention blocks read: `vlreg.core.images.cross_attention`). Everything that differs between the ways is answered by the entry, in one place,
and the rest of vlreg asks the entry, never which one it is:

* ``vision.image_features`` itself: its `Site` (`features`: where it is read, the view of
  what the model holds there and its inverse), the forward it is read inside and its
  batch layout (`features_inside`, `features_layout`);
* where the root computes the image's values among its own (`order`) and how the forward
  order names the features (`words`) and what it computes before them (`told`);
* the image's discrete codes, if it has any (`codes`, their `Site`), and the envoy
  classes that reading needs (`envoys`);
* how an image's tokens are placed for `vision.geometry` (`place`);
* what a trace's invokes must satisfy (`check_invokes`);
* whether the image has tokens in the text stream (`not_in_stream`) and whether those
  tokens are the tower's patches (`not_patches`);
* what it mounts under ``model.vision`` (`mount`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..serving.sites import Site
from .arguments import _argument, _shares_storage, _with_argument
from .geometry import ImageGeometry, source_of


class Entry:
    """Where and how the image enters the text model: a wrapper's answer to `vlreg_entry`.

    The base answers as a scatter into the embeddings does; each way overrides what it
    does otherwise. ``host`` is the module (path from the root, ``""`` for the root) whose
    forward takes the features, and ``argument`` their position or keyword there.
    """

    host: str = ""
    argument: int | str = 1
    token: str = "image_token_id"  # the config field naming the placeholder's id (`Scatter.token`)
    #: Whether the prompt holds the image's tokens (placeholders the features are written at,
    #: or read at); not where the image's tokens are put before it (`Prefix`).
    in_prompt: bool = True
    #: The root's values between the image-token mask and the blocks, in the order the
    #: forward computes them (`StandardizedTransformer.order`). An entry ``"vision.<value>"``
    #: places that tower value there, after the tower's others.
    order: tuple[str, ...] = ("token_embeddings", "vision")
    #: How the forward order in words names where ``vision.image_features`` is read.
    words: str = "where the features enter the embeddings"
    #: Values of ``model.vision`` the forward computes after the projector, before the
    #: features, each told by its own name in the forward order in words, with what it is
    #: (`ImageCodes`' codes); the tower's other values are told within the tower.
    told: Mapping[str, str] = {}
    generation: str | None = None
    embeddings_to: str | None = None
    steps: str | None = None
    needs_images: bool = False
    #: How ``vision.image_features`` holds a batch of several invokes (`vlreg.core.serving.batching`).
    features_layout: str = "image_tokens"
    #: The processor's input that tells an image's tokens from a video's where both are
    #: written with the image's placeholder (GLM's ``mm_token_type_ids``: 1 at an image's
    #: token, 2 at a video's); ``None``: a video has a placeholder id of its own.
    token_types: str | None = None
    #: Why one forward cannot carry images and videos together (``None``: it can); a trace
    #: whose invokes hold both is refused with it before the model runs.
    apart: str | None = None
    #: The processor's output marking the image's tokens (1 at each), where no placeholder id
    #: does (Kosmos-2's ``image_embeds_position_mask``: its image tokens are ordinary ids);
    #: ``None``: the tokens are the placeholder's id (``token``).
    marks: str | None = None
    #: Where the factor the text model multiplies the scattered embeddings by, image tokens
    #: included, sits on the root module (a dotted attribute path, Kosmos-2's
    #: ``text_model.model.embed_scale``); ``None``: they are not scaled after the scatter.
    scaled_by: str | None = None

    def token_mask(self, model: Any, inputs: Mapping, video: bool = False) -> torch.Tensor | None:
        """The image's tokens (``video``: the video's) in the model's keyword ``inputs``
        (``None`` without ``input_ids``, or where neither the config names an image token nor a
        processor output marks them, `marks`): every
        such mask vlreg reads is this one."""
        ids = inputs.get("input_ids")
        if ids is None or (model.image_token_id is None and self.marks is None):
            return None
        if self.marks is not None:  # no id marks them: the processor's mask does (none given: no image)
            marked = inputs.get(self.marks)
            return torch.zeros_like(ids, dtype=torch.bool) if marked is None or video else marked.to(ids.device) == 1
        if self.token_types is None:
            return ids == (model._module.config.video_token_id if video else model.image_token_id)
        kinds = inputs.get(self.token_types, torch.ones_like(ids))  # none given: every placeholder an image's
        return (ids == model.image_token_id) & (kinds.to(ids.device) == (2 if video else 1))

    def scale_of(self, model: Any) -> float:
        """The factor the first block receives the token embeddings times, outside the image
        tokens (`Injections.scale`, `scaled_by`); 1 where the stream entering it holds them as they are."""
        if self.scaled_by is None:
            return 1.0
        found = model._module
        for name in self.scaled_by.split("."):
            found = getattr(found, name)
        return float(found)

    def mount(self, model: Any) -> None:
        """Put what the image passes through outside the tower under ``model.vision`` (a
        `QueryTokens`' Q-Former); most entries have nothing to mount."""

    def nested(self, model: Any) -> list[tuple[str, Any]]:
        """The calls inside the host's forward whose own operations the entry reads at, each
        as its operation's location and the function it calls (`vlreg.core.serving.drilled`);
        most entries read at the host's level, none."""
        return []

    def not_patches(self) -> str | None:
        """Why an image token is not a patch or a block of patches of the tower (``None``:
        it is one, and a grid's ``fold`` says how many), for the helpers that draw the
        tower's per-patch values onto the tokens."""
        return None

    def not_in_stream(self) -> str | None:
        """Why the image has no tokens in the text stream (``None``: it has, at the
        image-token mask), for the helpers that work on those tokens."""
        return None

    def refuses(self) -> dict:
        """The entry's own refusal table (`vlreg.core.serving.refusals`), rows from the root:
        what this way of entering leaves unserved. Most entries refuse nothing."""
        return {}

    def envoys(self) -> dict:
        """Envoy classes this entry needs beside the plugins' (`vlreg_envoys` entries, a key
        a module class or a module's path from the root): none but `ImageCodes`'."""
        return {}

    def video_features(self, vision: Any) -> Site | None:
        """``vision.video_features``' `Site`, where the wrapper writes a video's features
        in; ``None``: this entry takes no video (the value is refused, saying so)."""
        return None

    def codes(self, vision: Any) -> Site | None:
        """``vision.image_codes``' `Site` (`ImageCodes`); ``None``: the image reaches the
        text model as features, with no ids of its own."""
        return None

    # -- vision.image_features ----------------------------------------------------

    def features(self, vision: Any) -> Site:
        """``vision.image_features``' `Site`: where it is read (`features_at`), the features
        as the user reads them (`read_features`, a view) and what an assignment puts back
        (`write_features`), and whether a read is a view (`views_features`)."""
        return Site(
            self.features_at(vision),
            lambda raw: self.read_features(vision, raw),
            lambda raw, new: self.write_features(vision, raw, new),
            lambda served, raw: self.views_features(vision, raw, served),
        )

    def host_envoy(self, model: Any) -> Any:
        """The envoy of the module whose forward takes the features."""
        return model.get(self.host) if self.host else model

    def features_at(self, vision: Any) -> str:
        """Where ``vision.image_features`` is read (a ``.input`` location)."""
        return f"{self.host_envoy(vision.root).path}.input"

    def features_inside(self, vision: Any) -> Any:
        """The envoy whose forward the location is an operation in, instrumented at build
        (``None``: the location is a module's own input)."""
        return None

    def native_features(self, vision: Any, raw: Any) -> Any:
        """The features as the location holds them, before `read_features` shapes them."""
        return _argument(raw, self.argument)

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        """The features from what the location holds: a view where their layout allows."""
        return self.native_features(vision, raw)

    def write_features(self, vision: Any, raw: Any, new: torch.Tensor) -> Any:
        """What the location should hold for features ``new``."""
        return _with_argument(raw, self.argument, new)

    def views_features(self, vision: Any, raw: Any, served: torch.Tensor) -> bool:
        """Whether ``served`` (what `read_features` gave) is a view of the features the
        location holds, so an in-place edit of it is already the model's. Where it is not
        (the features were not laid out for the reshape: Perception LM's pooling hands the
        scatter a transposed tensor, and torch copies it), ``vision.image_features`` first
        writes the copy into the model through `write_features` and serves a view of it
        (`value.viewable`), so edits land on every family alike."""
        return _shares_storage(served, self.native_features(vision, raw))

    def received(self, model: Any, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """What the text model's first stack receives at the image tokens, from the token
        embeddings there and ``vision.image_features`` (rows alike): the features, which the
        entry writes over the placeholders' embeddings. An additive entry (`Scatter.added`)
        receives their sum; a scaled one (`scaled_by`) that times the scale (the same float
        multiply the model does, so the same bits)."""
        written = self.written(embeddings, features)
        return written if self.scaled_by is None else written * self.scale_of(model)

    def written(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """What the entry leaves at the image tokens before any scale: the features."""
        return features

    def of_image(self, features: torch.Tensor, image: ImageGeometry) -> torch.Tensor:
        """``image``'s rows of ``features`` (`vision.image_features` as served)."""
        return features[image.features]

    def along(self, model: Any, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What the first block receives outside the image tokens, from the token embeddings
        (``[batch, seq, hidden]``, as ``token_embeddings`` serves them), at the positions of
        its stream, which ``mask`` (the image-token mask) spans: the embeddings themselves
        here; an entry that puts the image's tokens before the prompt's (`Prefix`) shifts
        them past those, and says what the model adds to them first."""
        return embeddings

    # -- what a trace must satisfy, and geometry -----------------------------------

    def shifted(self, positions: torch.Tensor, shift: int) -> torch.Tensor:
        """An image's positions in a batch row whose prompt the padding moved by ``shift``
        (`ImageGeometry.placed`): moved with it, the image's tokens being the prompt's."""
        return positions + shift

    def check_invokes(self, model: Any, invokes: list) -> None:
        """Refuse invokes this entry cannot take, before the model runs: a prompt without
        an image where the wrapper's forward needs one on every call (``needs_images``)."""
        if not self.needs_images or model.processor is None:
            return
        for inputs, kwargs in invokes:
            given = [kwargs, *(item for item in inputs if isinstance(item, Mapping))]
            if not any(each.get(name) is not None for each in given for name in ("images", "pixel_values")):
                raise ValueError(
                    f"the {model.family.name!r} family's {type(model._module).__name__} runs its vision tower on "
                    f"every forward, so every prompt needs an image: pass images=[...] (one per prompt) with it"
                )

    def place(self, model: Any, encoding: Any, declared: list, images: list) -> list[ImageGeometry]:
        """Each image's `ImageGeometry`, from the processor's ``encoding``, the family's
        grids for each image (``declared``) and the images: its tokens are the next run of
        image tokens in mask order, as many as its grids hold."""
        rows, positions = self.token_mask(model, encoding).nonzero(as_tuple=True)
        counts = [sum(grid.tokens for grid in grids) for grids in declared]
        if sum(counts) != rows.numel():
            raise ValueError(
                f"the family's grids give {counts} tokens per image ({sum(counts)} in all), but the "
                f"processor put {rows.numel()} image tokens in the prompt"
            )
        found, offset = [], 0
        for index, (grids, count, image) in enumerate(zip(declared, counts, images)):
            row = rows[offset : offset + count]
            if count and not (row == row[0]).all():
                raise ValueError(f"image {index}'s tokens span several batch rows")
            found.append(ImageGeometry(
                index=index, row=int(row[0]) if count else -1, positions=positions[offset : offset + count],
                grids=grids, size=tuple(image.size), offset=offset,
                source=source_of(encoding, int(row[0])) if count else None,
            ))
            offset += count
        return found
