"""`Scatter`: the entry of an image whose features the wrapper writes into the token
embeddings (transformers' composite layout's, `SCATTER`), and its variants by field: a video
written in too (`VIDEO_SCATTER`), a second tower, a video tower, features added (``added``)
or assigned by subscript inside a nested call (``assigned``)."""

from __future__ import annotations

from typing import Any

import torch
from attrs import frozen

from ..serving.refusals import Gate
from ..serving.sites import Site
from .arguments import _argument, _joined, _pieces, _shares_storage, _with_argument
from .entries import Entry


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
    #: The operation in the host's forward (nested ones by ``.source.``) whose output the
    #: forward assigns over the image tokens' embeddings by subscript, which nnsight names no
    #: operation at the host's level (Kosmos-2's ``inputs_embeds[mask] = image_embeds.view(...)``,
    #: ``self_forward_embedding_0.source.view_0``): ``vision.image_features`` is read and written
    #: there, after the tokens are embedded. The assignment is in place, so the model goes on
    #: with a copy of the token embeddings (`mount`): ``token_embeddings`` keeps what was embedded.
    assigned: str | None = None
    marks: str | None = None  # `Entry.marks` (Kosmos-2's ``"image_embeds_position_mask"``)
    scaled_by: str | None = None  # `Entry.scaled_by` (Kosmos-2's ``"text_model.model.embed_scale"``)

    def mount(self, model: Any) -> None:
        """Bind ``model.vision.second_tower`` and ``model.vision.video_tower`` to those towers'
        envoys, the same objects as ``model.<path>`` (as a rename alias is), where there are;
        where the features are ``assigned`` in place, hand the model a copy of the token embeddings."""
        from ..envoys.towers import as_video_tower

        embed = model.embed_tokens._module
        if self.assigned is not None and _copied not in embed._forward_hooks.values():
            embed.register_forward_hook(_copied)  # after nnsight's output: token_embeddings stays as embedded
        vision = model.__dict__.get("vision")
        if vision is None:
            return
        if self.second_tower is not None and "second_tower" not in vision.__dict__:
            object.__setattr__(vision, "second_tower", model.get(self.second_tower))
        if self.video_tower is not None and "video_tower" not in vision.__dict__:
            tower = model.get(self.video_tower)
            tower.__class__ = as_video_tower(type(tower))  # the image tower's class: its values become a video's
            object.__setattr__(vision, "video_tower", tower)

    def nested(self, model: Any) -> list[tuple[str, Any]]:
        """The call an ``assigned`` operation is inside (``self_forward_embedding_0`` of
        ``self_forward_embedding_0.source.view_0``): the host's method of that name."""
        if self.assigned is None or ".source." not in self.assigned:
            return []
        call = self.assigned.split(".source.")[0]
        method = call.removeprefix("self_").rsplit("_", 1)[0]
        host = self.host_envoy(model)
        return [(f"{host.path}.source.{call}", getattr(host._module, method))]

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

    def written(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return features if self.added is None else embeddings + features

    def _at_output(self, vision: Any) -> bool:
        """Whether the features are an operation's or a module's output (not an argument)."""
        return self.added is not None or self.assigned is not None or self._generated(vision)

    def features_at(self, vision: Any) -> str:
        if self._generated(vision):
            return f"{vision.root.get(self.generation).path}.output"
        if self.added is not None or self.assigned is not None:
            host = f"{self.host}." if self.host else ""
            return f"{vision.root.path}.{host}source.{self.added or self.assigned}.output"
        return f"{vision.root.path}.{self.call(vision.root)[0]}.input"

    def features_inside(self, vision: Any) -> Any:
        return self.host_envoy(vision.root)

    def native_features(self, vision: Any, raw: Any) -> Any:
        return raw if self._at_output(vision) else _argument(raw, self.argument)

    def read_features(self, vision: Any, raw: Any) -> torch.Tensor:
        """The features, a row a token; where the call takes them as one tensor per image
        (Ovis 2.5's ``_merge_visual_features``), those joined in order (a copy)."""
        features = self.native_features(vision, raw)
        if self.added is not None or self.assigned is not None:  # flattened to one axis: rows of the text width
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


def _copied(module: Any, inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.clone()


#: transformers' composite layout's image entry: ``model``'s first ``inputs_embeds.masked_scatter``.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)
#: The same where a video is written in too, by ``model``'s second one (the Qwen VL and LLaVA video lines).
VIDEO_SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", videos="inputs_embeds_masked_scatter_1")
