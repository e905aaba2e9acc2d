"""The vision interface every family shares: `Vision` (its blocks' classes: `vlreg.core.envoys.patches`).

The tower is ``model.vision`` and its blocks ``model.vision.layers[i]``; the projector is
``model.projector``, the last module before the scatter. Two values sit where the image
meets the text model and are read outside the tower: `Vision.image_token_mask`, off
the model's inputs, and `Vision.image_features`, where the family's entry (`Entry`: a
scatter into the embeddings, query tokens, cross-attention states) hands the features to
the text model, so that ``layers[0].input[image_token_mask] == image_features`` on every
family that scatters, whatever the projector's output looked like before.

Tower values are `Patches`, ``[images, patches, vision_hidden_size]``. A tower that runs
on ``[patches, vision_hidden_size]`` with every image in one row (the Qwen ViT) is
served through the same classes: `as_patches` gives the native tensor a leading axis
of 1 as a view, so in-place edits land, and an assignment is reshaped back to the
native layout. Block ``input`` and ``output`` stay native.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import Unavailable
from ..serving.refusals import read_only, refusal
from ..serving.sites import model_inputs
from ..serving.values import built, first, value, with_first
from .sizes import agreed
from .standard import Standard
from .patches import Patches, as_patches, patches

def _last_hidden_state(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state if hasattr(raw, "last_hidden_state") else first(raw)


def _put_last_hidden_state(raw: Any, new: torch.Tensor) -> Any:
    """Replaced under every name the output holds it (Inkling 1's wrapper reads it as ``pooler_output``)."""
    if hasattr(raw, "last_hidden_state"):
        for key in [key for key, held in raw.items() if held is raw.last_hidden_state]:
            raw[key] = new
        return raw
    return with_first(None, raw, new)


def _derived_mask(vision: "Vision") -> str:
    return (
        "it is derived from the prompt's tokens (input_ids == the image token id), and the model "
        "finds the image tokens from input_ids itself; to move or drop image tokens, edit the "
        "prompt, and to change what an image contributes, edit vision.image_features"
    )


def _derived_video_mask(vision: "Vision") -> str:
    return (
        "it is derived from the prompt's tokens (input_ids == the video token id); to change what a "
        "video contributes, edit vision.video_features"
    )


def _no_videos(vision: "Vision") -> str | None:
    video = getattr(vision.root._module.config, "video_token_id", None)
    entry = vision.place.entry
    if entry is not None and entry.token_types is not None:  # one placeholder, told apart by the processor's types
        return None
    if video is None:
        return f"the {vision.root.family.name!r} family's config has no video token (video_token_id), so no prompt holds a video"
    if video == vision.root.image_token_id:
        return ("this family writes its image at the video's placeholder (video_token_id): a video's frames are its "
                "images, served as vision.image_token_mask and vision.image_features")
    return None


def _no_video_entry(vision: "Vision") -> str | None:
    """Why this family serves no video value: its entry writes no video in (`Entry.video_features`)."""
    entry = vision.place.entry
    if entry is not None and entry.video_features(vision) is not None:
        return None
    if "vision.video_features" in vision.root.family.sentences:  # the family says why, in its words
        return None
    return (
        f"the {vision.root.family.name!r} family serves no video values: its wrapper writes no video's "
        "features in where vlreg reads them (its entry declares no videos=)"
    )


def _token_mask(vision: "Vision", raw: Any, video: bool) -> torch.Tensor:
    """The entry's mask (`Entry.token_mask`) of the model's inputs ``raw``."""
    args, kwargs = raw
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None:
        raise Unavailable(
            f"vision.{'video' if video else 'image'}_token_mask is unavailable: the model was called with no "
            "input_ids (inputs_embeds only), so the tokens cannot be found"
        )
    return vision.root._token_mask({**kwargs, "input_ids": ids}, video=video)


#: A video's values, each with the image's it follows in forward order.
VIDEO_VALUES = {"video_token_mask": "image_token_mask", "video_features": "image_features"}


def config_size(field: str, doc: str | None = None) -> property:
    """A tower size as its config states it: a property reading ``field`` of the vision
    config (``doc``, its docstring), for a size no module holds."""
    return property(lambda vision: getattr(vision._vision_config, field), doc=doc)


class Vision(Standard):
    """The vision tower, and the two values where the image meets the text model.

    Sizes are read off the tower's own config; a family whose config names them
    differently overrides the properties. They shadow the root's on purpose: a tower
    value's axes are the tower's sizes.
    """

    #: ``second_tower``: a tower the projector reads beside this one, mounted by the entry
    #: (`Scatter.second_tower`), after this tower in the forward.
    #: ``video_tower``: a tower only a video's frames run through (`Scatter.video_tower`), after
    #: the images' scatter.
    standard_children = {"layers": "", "second_tower": "second_tower.", "video_tower": "video_tower."}
    video_values = VIDEO_VALUES
    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "second_tower", "image_features",
             "video_tower")
    #: Whether only a video's frames run through this tower (`as_video_tower`): its values
    #: are a video's call's, served on a run that carries a video.
    videos_only: bool = False
    #: Why `vlreg.analysis.tower_patterns` cannot fold this tower's pattern onto its grids
    #: (Ovis 2.5's: its tokens run window by window); ``None``: it can.
    patterns_unfoldable: str | None = None
    #: Rows before the patches in the tower's own sequence (CLIP's class token: 1).
    class_tokens: int = 0
    #: Rows after the patches in the tower's own sequence (Llama 4's class token, which it
    #: appends: 1).
    trailing_tokens: int = 0
    #: The axis of the tower's output along which its batch lies: 0 (images, crops, or a
    #: packed ``[patches, hidden]`` row), or 1 where every image's patches are packed into
    #: one row behind a leading axis of 1 (Pixtral's ``[1, patches, hidden]``). A replayed
    #: `TowerCache` repeats the output along it, once per copy of the images.
    batch_axis: int = 0
    #: Whether the wrapper runs the tower on each image alone, a call an image in
    #: ``pixel_values``' order (Apertus 1.5's vision tokenizer, which crops each image to its
    #: own size): the tower's values are one call's, so they are refused on a run of several
    #: images, and a `TowerCache` keeps and replays every call's output.
    per_image: bool = False
    #: Whether the tower's values hold padding among an image's patches: Gemma 4 pads each
    #: image's row after its own patches to a fixed length (its budget), so the values run
    #: past the image's patches; Idefics2 pads a batch's frames at their right and bottom
    #: to the largest (its crops to the whole image's frame), which only the pixel mask
    #: locates.
    padded_patches: bool = False
    #: Whether the processor writes each image's placeholders itself, before its prompt's
    #: text, one image a prompt (Florence-2's): a prompt holding a placeholder, or a prompt
    #: given another number of images, is refused before the processor runs.
    writes_placeholders: bool = False
    #: Whether a prompt's images are the frames of one clip (InstructBLIP-Video's, whose
    #: processor writes a row of query tokens per frame): with `writes_placeholders`, a
    #: prompt takes any number of frames, a list of them per prompt where several prompts
    #: carry clips, every clip as long.
    clips: bool = False
    #: Whether each image's placeholder in the prompt is one run of the image token, counted
    #: as one image however long (PP-Chart2Table's template writes an image's tokens out and
    #: its processor expands nothing; GOT-OCR 2's one ``<imgpad>`` is a run of one).
    placeholder_runs: bool = False
    #: Whether the processor takes a batch's images as one flat list, each prompt's in order,
    #: where others take a list per prompt (GOT-OCR 2's reads a nested list as one prompt's
    #: pages): vlreg hands it the prompts' images so.
    flat_images: bool = False
    #: Whether the processor takes numpy arrays and torch tensors as images. Idefics2's
    #: loads every image through transformers' ``load_image``, which takes PIL images (and
    #: paths, URLs) only: an array is then refused in vlreg's words before the processor runs.
    takes_arrays: bool = True

    def image_refusal(self, width: int, height: int) -> str | None:
        """Why an image ``width`` x ``height`` pixels cannot run on this family, saying what
        size can, or ``None``: where the processor or the tower would fail on it deep inside
        (a side too short to cut into crops, more patches along a side than the positions
        reach) or it would make no image token. A family's `Vision` declares it; a trace and
        the geometry refuse such an image before the processor runs."""
        return None

    def images_refusal(self, sizes: list[tuple[int, int]]) -> str | None:
        """Why images of these ``(width, height)`` cannot go through one processor call
        together, or ``None``: a processor that stacks each image's tiles into one tensor
        fails on images of different tile counts (Perception LM's). Declared like
        `image_refusal`; a trace (all its invokes: one call) and the geometry refuse them."""
        return None

    refuses = {
        "image_token_mask": read_only(_derived_mask),
        "video_token_mask": (_no_videos, read_only(_derived_video_mask)),
        "video_features": _no_video_entry,
    }

    @value(model_inputs, layout="batch")
    def image_token_mask(self, raw: Any) -> torch.Tensor:
        """``[batch, seq]``, True at the image tokens (read it before the tower runs)."""
        return _token_mask(self, raw, video=False)

    @value(model_inputs, layout="batch")
    def video_token_mask(self, raw: Any) -> torch.Tensor:
        """``[batch, seq]``, True at the video tokens (the video placeholder's, apart from
        the image's; where both share the image's placeholder, told apart by the
        processor's token types: `Entry.token_types`)."""
        return _token_mask(self, raw, video=True)

    @value(lambda vision: f"{vision.patch_embed.path}.output")
    def patch_embeddings(self, raw: torch.Tensor) -> Patches:
        """The patch embedding's output, one row per patch (a convolution's grid flattened
        to rows, as a view)."""
        return raw.flatten(2).transpose(1, 2) if raw.dim() == 4 else as_patches(raw)

    @patch_embeddings.writes
    def patch_embeddings(self, raw: torch.Tensor, new: Patches) -> torch.Tensor:
        if raw.dim() == 4:
            return new.transpose(1, 2).reshape(raw.shape)
        return new.reshape(raw.shape)

    tower_output = patches(
        "output",
        read=_last_hidden_state,
        put=_put_last_hidden_state,
        description="the last block's stream after the tower's final norm, before pooling or projection",
    )

    image_features = built(
        lambda vision: vision.place.entry.features(vision),
        inside=lambda vision: vision.place.entry.features_inside(vision),
        layout=lambda vision: vision.place.entry.features_layout,
        description="the features as the text model receives them",
    )

    video_features = built(
        lambda vision: vision.place.entry.video_features(vision),
        inside=lambda vision: vision.place.entry.features_inside(vision),
        layout="video_tokens",
        description="the video's features as the text model receives them, at the video tokens",
    )

    @classmethod
    def values(cls) -> list[str]:
        """In forward order, a video's values each beside the image's (a family's ``order``
        need not name them): its mask off the inputs after the image's, its features after
        the image's (the Qwen and LLaVA video lines write the video in after the image)."""
        names = [name for name in super().values() if name not in VIDEO_VALUES]
        for video, image in VIDEO_VALUES.items():
            if image in names:
                names.insert(names.index(image) + 1, video)
        return names

    def geometry(self, prompt: Any, images: Any = None, videos: Any = None, **options: Any) -> list:
        """Each image of ``prompt`` as the text model sees it, in the order given: its batch
        row, its image tokens' positions, its token grids and the pixel box each token
        covers in the original image (`ImageGeometry`); then, with ``videos=[...]``, each
        video's (`VideoGeometry`: each token's first and last frame, its box in them, the
        time the processor writes). Runs the processor, not the model, so it needs no
        trace; the family declares the grids (`vlreg_image_grids`, `vlreg_video_grids`).
        ``options`` are the processor's, as a trace takes them (``max_pixels=``, ...).
        Inside an invoke of a batch, `ImageGeometry.placed` gives its row and positions there."""
        if videos is not None:
            return self.root._video_geometry(prompt, images, videos, **options)
        return self.root._image_geometry(prompt, images, **options)

    def cache(self, prompt: Any, images: Any, **options: Any) -> Any:
        """Run ``prompt`` with ``images`` once and keep the tower's output, to replay in
        traces of the same images (`vlreg.core.reuse.TowerCache`): a sweep over copies of
        one prompt then runs the tower once, not once per copy. ``options`` are the
        processor's, as a trace takes them."""
        return self.root._tower_cache(prompt, images, **options)

    def processor_refusal(self, processor: Any) -> str | None:
        """Why the processor, as a trace's options configure it, cannot run in this process,
        saying what can, or ``None``: a setting whose path needs a library not installed
        (MiniCPM-OCR's ``small_image_upsize="adaptive"`` measures glyphs with OpenCV). A trace
        and the geometry refuse it before the processor runs."""
        return None

    def encoding_refusal(self, encoding: Any) -> str | None:
        """Why the model cannot run what the processor made of a trace's inputs (``encoding``:
        the processor's output as the forward takes it, ``video_grid_thw`` ...), saying what
        can, or ``None``: a limit of transformers' forward that only the processed input shows
        (Kimi K2.5's on transformers before 5.25: a chunk of several frames). A trace refuses
        it after the processor runs and before the model does; the geometry, which runs no
        model, serves it."""
        return None

    def layer_fold(self, index: int) -> int:
        """How many of the tower's patches, along a side, one row of block ``index``'s stream
        holds: 1, unless the tower merges patches between its blocks (MiniCPM-V's ``vit_merger``
        after block ``insert_layer_id``: 2 after it). A token of a grid of ``fold`` is then
        ``fold // layer_fold(index)`` rows a side in block ``index``, which `tower_patterns` and
        the suite's per-patch checks read."""
        return 1

    def no_images(self) -> str | None:
        """``None`` when images reach the model, else why not (then every vision value is
        `Unavailable` with that reason)."""
        model = self.root
        if model.family.entry is None:
            return (
                f"the {model.family.name!r} family names no projector for "
                f"{type(model._module).__name__}, so no image reaches the text model"
            )
        if model.processor is None:
            return (
                "a text-only load: no processor, so no image reaches the model; "
                "load with task='image-text-to-text'"
            )
        return None

    def no_videos(self) -> str | None:
        """``None`` where a prompt can hold a video (the config names a video token of its
        own), else why not: `support` then leaves a video's rows out, as it leaves a
        tower's out where no image reaches it."""
        return _no_videos(self)

    def video_calls(self) -> str | None:
        """How the tower's values are told apart on a video (`support`'s ``videos`` row), or
        ``None`` where no video reaches this tower (none can, or the entry writes none in)."""
        entry = self.place.entry
        if self.no_images() or self.no_videos() or entry is None or entry.video_features(self) is None:
            return None
        if getattr(entry, "video_tower", None) is not None:
            return (
                "a video's frames run through a tower of their own, model.vision.video_tower: its values are the "
                "video's call's, on a trace whose prompts carry a video; model.vision's are the images' call's"
            )
        return (
            "a video's frames run through the tower in a call of their own, after the images': the tower's values "
            "are the video's call's on a trace whose prompts carry videos and no image, and the images' call's "
            "where they carry images too; trace a video without images to read the tower on its frames"
        )

    def without_blocks(self) -> str:
        """Why a helper over the tower's blocks cannot run where `num_layers` is 0: a family
        whose tower has blocks vlreg does not serve says so instead (by overriding this, or
        by a claim refusing ``vision.layers``)."""
        return refusal(self, "layers") or (
            "this model's vision part has no blocks (an embedder, not a tower), so no attention runs among its patches"
        )

    # -- sizes, off the tower's config ------------------------------------------

    @property
    def _vision_config(self) -> Any:
        return self._module.config

    @property
    def num_layers(self) -> int:
        blocks = self.__dict__.get("layers")  # none where no blocks are served (`without_blocks`)
        return 0 if blocks is None else len(blocks)

    vision_hidden_size = config_size("hidden_size")

    @property
    def patch_embedding_size(self) -> int:
        """The width of ``patch_embeddings``: the tower's, but on a tower whose stages
        widen (DaViT's), the first stage's; refused where ``patch_embeddings`` is."""
        if reason := refusal(self, "patch_embeddings"):
            raise Unavailable(f"vision.patch_embedding_size is unavailable: {reason}")
        return self.vision_hidden_size

    @property
    def num_heads(self) -> int:
        return agreed(self.__dict__.get("layers"), "self_attn", "num_heads", "vision.num_heads",
                      lambda: self._vision_config.num_attention_heads)

    @property
    def head_dim(self) -> int:
        return agreed(self.__dict__.get("layers"), "self_attn", "head_dim", "vision.head_dim",
                      lambda: self.vision_hidden_size // self.num_heads)

    @property
    def qk_head_dim(self) -> int:
        """The width of one tower head's queries and keys."""
        return agreed(self.__dict__.get("layers"), "self_attn", "qk_head_dim", "vision.qk_head_dim",
                      lambda: self.head_dim)

    @property
    def intermediate_size(self) -> int:
        return agreed(self.__dict__.get("layers"), "mlp", "intermediate_size", "vision.intermediate_size",
                      lambda: self._vision_config.intermediate_size)

    patch_size = config_size("patch_size")
    image_size = config_size("image_size")


def variable_resolution(vision: Vision) -> int:
    """`Vision.image_size` for a tower with no fixed resolution."""
    raise Unavailable(
        "vision.image_size is unavailable: the processor cuts each image into its own grid "
        "of patches; each image's grid is in the processor's output (image_grid_thw)"
    )
