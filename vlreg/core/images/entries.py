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
from attrs import frozen

from ..serving.refusals import Gate
from ..serving.sites import Site
from .arguments import _argument, _joined, _pieces, _shares_storage, _with_argument
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

    def token_mask(self, model: Any, inputs: Mapping, video: bool = False) -> torch.Tensor | None:
        """The image's tokens (``video``: the video's) in the model's keyword ``inputs``
        (``None`` without ``input_ids``): every such mask vlreg reads is this one."""
        ids = inputs.get("input_ids")
        if ids is None:
            return None
        if self.token_types is None:
            return ids == (model._module.config.video_token_id if video else model.image_token_id)
        kinds = inputs.get(self.token_types, torch.ones_like(ids))  # none given: every placeholder an image's
        return (ids == model.image_token_id) & (kinds.to(ids.device) == (2 if video else 1))

    def scale_of(self, model: Any) -> float:
        """The factor the first block receives the token embeddings times, outside the image
        tokens (`Injections.scale`); 1 where the stream entering it holds them as they are."""
        return 1.0

    def mount(self, model: Any) -> None:
        """Put what the image passes through outside the tower under ``model.vision`` (a
        `QueryTokens`' Q-Former); most entries have nothing to mount."""

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

    def received(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """What the text model's first stack receives at the image tokens, from the token
        embeddings there and ``vision.image_features`` (rows alike): the features, which the
        entry writes over the placeholders' embeddings. An additive entry (`Scatter.added`)
        receives their sum."""
        return features

    def of_image(self, features: torch.Tensor, image: ImageGeometry) -> torch.Tensor:
        """``image``'s rows of ``features`` (`vision.image_features` as served)."""
        return features[image.features]

    # -- what a trace must satisfy, and geometry -----------------------------------

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


@frozen
class Scatter(Entry):
    """The wrapper writes the image features into the token embeddings.

    ``host`` is the module (path from the model root, ``""`` for the root) whose
    forward makes the call; ``operation`` is nnsight's name for the call in that
    forward (``inputs_embeds_masked_scatter_0``); ``argument`` is the position of the
    features among its arguments, or the name of the keyword that passes them
    (``"image_hidden_states"`` for Idefics3's ``self.inputs_merger``). The host's
    forward is source-instrumented when the model is built, because the tower runs
    inside it: first touching it after reading a tower value would ask for a place the
    model has already passed.
    """

    host: str
    operation: str
    argument: int | str = 1
    #: Under ``generate``, the module (path from the root) whose output is the features,
    #: where the host's forward does not write them there: an encoder-decoder's generate
    #: (Florence-2's) embeds the prompt and writes the features in before its first step,
    #: outside any forward, and hands the encoder the result. ``None``: the scatter runs
    #: under generate as in a trace.
    generation: str | None = None
    #: The root's values between the image-token mask and the blocks (`Entry.order`):
    #: here the host embeds the tokens, then runs the tower and writes the features in.
    order: tuple[str, ...] = ("token_embeddings", "vision")
    #: The module (path from the root) the scattered embeddings are handed to as
    #: ``inputs_embeds``, where the first block does not receive them as they are (OPT's
    #: decoder adds learned position embeddings first): `prompt_entry` reads them there.
    #: ``None``: the first block's input is the stream as the scatter left it.
    embeddings_to: str | None = None
    #: Under ``generate``, the module (path from the root) each step calls, where the
    #: wrapper's generate steps its text model instead of calling its own forward (BLIP-2's
    #: hands ``language_model.generate`` the embeddings): the root's inputs are then never
    #: reached under generate, and the positions a step computes are read off this module's.
    #: ``None``: every step calls the root.
    steps: str | None = None
    #: Whether the wrapper's forward needs an image on every call (BLIP-2's runs its tower
    #: unconditionally): a text-generation load, which has no processor, and a prompt
    #: without an image are refused before the model runs.
    needs_images: bool = False
    #: The config field naming the id of the placeholder the features are written at
    #: (InstructBLIP-Video's: ``video_token_id``; `StandardizedTransformer.image_token_id`).
    token: str = "image_token_id"
    #: The operation in the host's forward that writes a video's features in, with the same
    #: arguments as ``operation`` (``inputs_embeds_masked_scatter_1`` on the Qwen line; where
    #: it takes one tensor a video, as Ovis 2.5's ``_merge_visual_features`` does, they are
    #: joined in order): ``vision.video_features`` is read there. ``None``: the family serves
    #: no video value.
    videos: str | None = None
    token_types: str | None = None  # `Entry.token_types` (GLM's ``"mm_token_type_ids"``)
    apart: str | None = None  # `Entry.apart`
    #: A second tower (path from the root) whose output the projector reads beside the
    #: tower's (DeepSeek-VL-Hybrid's high-resolution SAM tower), mounted at
    #: ``model.vision.second_tower``, its values the tower's. ``None``: one tower.
    second_tower: str | None = None
    #: A tower (path from the root) only a video's frames run through (Video-LLaVA's
    #: ``model.video_tower``, of the image tower's class), mounted at
    #: ``model.vision.video_tower`` as `as_video_tower` of its class: its values are the
    #: video's call's. ``None``: a video's frames run through the tower, or none is read.
    video_tower: str | None = None
    #: The operation in the host's forward whose output is the features the scatter *adds*
    #: onto the placeholders' embeddings (Molmo 2's ``image_features_reshape_0``: its scatter
    #: writes ``embeddings[mask] + features``): ``vision.image_features`` is read and written
    #: there, the added part, and block 0 receives the sum (`received`). ``None``: the
    #: scatter writes the features over the embeddings.
    added: str | None = None

    def mount(self, model: Any) -> None:
        """Bind ``model.vision.second_tower`` and ``model.vision.video_tower`` to those towers'
        envoys, the same objects as ``model.<path>`` (as a rename alias is), where there are."""
        from ..envoys.towers import as_video_tower

        vision = model.__dict__.get("vision")
        if vision is None:
            return
        if self.second_tower is not None and "second_tower" not in vision.__dict__:
            object.__setattr__(vision, "second_tower", model.get(self.second_tower))
        if self.video_tower is not None and "video_tower" not in vision.__dict__:
            tower = model.get(self.video_tower)
            tower.__class__ = as_video_tower(type(tower))  # the image tower's class: its values become a video's
            object.__setattr__(vision, "video_tower", tower)

    def refuses(self) -> dict:
        """Where the wrapper's generate steps its text model (``steps``), the model's own
        inputs are never reached under generate: the values read off them refuse there."""
        if self.steps is None:
            return {}
        return dict.fromkeys(("input_ids", "attention_mask", "vision.image_token_mask"), Gate(self._not_stepped))

    def _not_stepped(self, asked: Any) -> str | None:
        if not asked.run.generating:
            return None
        return (
            f"under generate this wrapper's generate never calls its own forward (it runs the image's steps "
            f"itself, then steps model.{self.steps}), so the model's inputs are never reached; read it in a trace"
        )

    def call(self, model: Any) -> tuple[str, int | str]:
        """The call that writes the features in, from the root, and the features' argument:
        ``("model.source.inputs_embeds_masked_scatter_0", 1)`` on Qwen2-VL."""
        host = f"{self.host}." if self.host else ""
        return f"{host}source.{self.operation}", self.argument

    def video_features(self, vision: Any) -> Site | None:
        if self.videos is None:
            return None
        # rows of the text model's width: LLaVA-NeXT-Video hands the scatter its features flattened to one axis
        width = vision.root.hidden_size

        def read(raw: Any) -> torch.Tensor:
            native = _argument(raw, self.argument)  # one tensor a video (Ovis 2.5's call): joined in order, a copy
            return (_joined(native) if isinstance(native, (tuple, list)) else native).reshape(-1, width)

        def write(raw: Any, new: torch.Tensor) -> Any:
            native = _argument(raw, self.argument)
            if isinstance(native, (tuple, list)):  # cut back at each video's rows
                new = _pieces(new.reshape(-1, width), native)
            return _with_argument(raw, self.argument, new)

        # a copy where the features are not laid out for the reshape (Perception LM's pooling transposes them):
        # the copy is written in and served as a view of it, as the image's features are (`views_features`)
        return Site(f"{self.host_envoy(vision.root).path}.source.{self.videos}.input", read, write,
                    lambda served, raw: _shares_storage(served, _argument(raw, self.argument)))

    def _generated(self, vision: Any) -> bool:
        return self.generation is not None and vision.run.generating

    def received(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return features if self.added is None else embeddings + features

    def _at_output(self, vision: Any) -> bool:
        """Whether the features are an operation's or a module's output (not an argument)."""
        return self.added is not None or self._generated(vision)

    def features_at(self, vision: Any) -> str:
        if self._generated(vision):
            return f"{vision.root.get(self.generation).path}.output"
        if self.added is not None:
            host = f"{self.host}." if self.host else ""
            return f"{vision.root.path}.{host}source.{self.added}.output"
        return f"{vision.root.path}.{self.call(vision.root)[0]}.input"

    def features_inside(self, vision: Any) -> Any:
        return self.host_envoy(vision.root)

    def native_features(self, vision: Any, raw: Any) -> Any:
        return raw if self._at_output(vision) else _argument(raw, self.argument)

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        """The features, a row a token; where the call takes them as one tensor per image
        (Ovis 2.5's ``_merge_visual_features``), those joined in order (a copy)."""
        features = self.native_features(vision, raw)
        if self.added is not None:  # flattened to one axis for the add: rows of the text model's width
            return features.reshape(-1, vision.root.hidden_size)
        if isinstance(features, (tuple, list)):
            features = _joined(features)
        return features.reshape(-1, features.shape[-1])

    def write_features(self, vision: Any, raw: Any, new: torch.Tensor) -> Any:
        if self._at_output(vision):
            return new.reshape(raw.shape)
        native = _argument(raw, self.argument)
        if isinstance(native, (tuple, list)):  # cut back at each image's rows
            new = _pieces(new.reshape(-1, new.shape[-1]), native)
        return _with_argument(raw, self.argument, new)


#: transformers' composite layout's image entry: ``model``'s first ``inputs_embeds.masked_scatter``.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)
#: The same where a video is written in too, by ``model``'s second one (the Qwen VL and LLaVA video lines).
VIDEO_SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", videos="inputs_embeds_masked_scatter_1")
