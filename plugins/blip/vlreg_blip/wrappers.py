"""The BLIP-2, InstructBLIP and InstructBLIP-Video wrappers: where the tower, the Q-Former,
the projector and the text model sit, and how the image enters.

The wrappers (``Blip2ForConditionalGeneration``, ``InstructBlipForConditionalGeneration``,
``InstructBlipVideoForConditionalGeneration``) hold their parts at the root, with no inner
``model``: ``vision_model`` (the tower),
``query_tokens`` (the learned queries, a parameter), ``qformer``, ``language_projection``
(the projector) and ``language_model`` (a causal LM: OPT on BLIP-2's published
checkpoints, Llama on InstructBLIP-Vicuna's). The root's forward runs the tower, the
Q-Former and the projector first, then embeds the prompt and writes the projected queries
in at the ``<image>`` tokens with ``masked_scatter(mask, features)`` (`OPERATION`), then
calls the text model with the result as ``inputs_embeds``: a `QueryTokens` entry.

Under ``generate`` the wrappers run their own ``generate``, which does the same steps
outside the root's forward and hands the text model's ``generate`` the embeddings, so the
features are the projector's output there (``generation``), each step calls the text model,
not the root (``steps``), and the root's inputs (the image-token mask) are never reached.
Every forward takes ``pixel_values``: a prompt without an image cannot run (``needs_images``).

InstructBLIP-Video is InstructBLIP run on a clip: its ``pixel_values`` are ``[clips, frames,
channels, height, width]``, the tower and the Q-Former run on every frame (the instruction
repeated per frame), and a clip's features are ``num_query_tokens`` rows per frame, frame by
frame, written at the ``<video>`` tokens (the config's ``video_token_id``: the entry's
``token``). A clip's frames are a prompt's images (`vlreg.plugin.Vision.clips`); each frame is
one grid of query tokens, as an InstructBLIP image is. Its processor
(``InstructBlipVideoProcessor``) writes ``num_query_tokens * 4`` placeholders whatever the
clip's length, which the model's forward can fill only for a clip of 4 frames; vlreg's
(`per_frame`, `vlreg_processor`) writes ``num_query_tokens`` per frame the clip has, the same
encoding for 4 frames, and a clip of one frame (an image) runs as the model's forward runs it;
its ``image_processor`` is the video processor, which processes the frames.

Not served, and declined by name before loading (`declines`): a T5 text model (the
``flan-t5`` checkpoints: ``use_decoder_only_language_model`` false, an encoder-decoder),
and OPT's variants no BLIP checkpoint uses (post-norm blocks, or a narrower embedding
projected in and out: OPT-350m's).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from vlreg.plugin import QueryTokens

#: Where the text model's standard mounts sit, per text model_type.
TEXT_RENAME = {
    "opt": {
        "language_model.model.decoder.embed_tokens": "embed_tokens",
        "language_model.model.decoder.layers": "layers",
        "language_model.model.decoder.final_layer_norm": "norm",
    },
    "llama": {
        "language_model.model.embed_tokens": "embed_tokens",
        "language_model.model.layers": "layers",
        "language_model.model.norm": "norm",
    },
}
RENAME = {"language_model.lm_head": "lm_head", "qformer.encoder.layer": "qformer.layers"}

#: nnsight's name for the scatter in each root's forward: BLIP-2 chains it on a ``.to(...)``.
OPERATION = {"blip-2": "masked_scatter_0", "instructblip": "inputs_embeds_masked_scatter_0",
             "instructblipvideo": "inputs_embeds_masked_scatter_0"}
#: The config field naming the placeholder the features are written at, where not ``image_token_id``.
TOKEN = {"instructblipvideo": "video_token_id"}
#: The frames InstructBlipVideoProcessor writes placeholders for, whatever the clip's length.
WRITTEN_FRAMES = 4


def entry(part: Any) -> QueryTokens:
    """The projected queries, scattered in the root's forward at the operation its
    ``model_type`` names there, at its placeholder."""
    return QueryTokens(host="", operation=OPERATION[part.model_type], generation="language_projection",
                       embeddings_to="language_model", steps="language_model", needs_images=True,
                       token=TOKEN.get(part.model_type, "image_token_id"))


def rename(part: Any) -> dict[str, str]:
    """The wrapper's mounts beside the tower and projector, with the text model's (by its
    ``model_type``: OPT or Llama)."""
    return {**RENAME, **TEXT_RENAME.get(part.config.text_config.model_type, {})}


def declines(part: Any) -> str | None:
    """Why vlreg-blip declines this BLIP checkpoint (``None``: it serves it)."""
    config = part.config
    text = config.text_config
    if not config.use_decoder_only_language_model:
        return (
            f"its language model is {text.model_type!r}, an encoder-decoder (use_decoder_only_language_model is "
            f"false: the flan-t5 checkpoints), and vlreg-blip serves BLIP over a decoder-only language model only "
            f"(OPT, as in Salesforce/blip2-opt-*, or Llama, as in InstructBLIP-Vicuna)"
        )
    if text.model_type == "opt" and not text.do_layer_norm_before:
        return ("its OPT text model norms after each sublayer (do_layer_norm_before is false, OPT-350m's), "
                "which vlreg-blip does not serve")
    if text.model_type == "opt" and text.word_embed_proj_dim != text.hidden_size:
        return (
            f"its OPT text model embeds tokens {text.word_embed_proj_dim} wide and projects them in and out of the "
            f"{text.hidden_size}-wide stream (OPT-350m's), which vlreg-blip does not serve"
        )
    return None


def image_grids(part: Any) -> Any:
    """Each image (a clip's frame, on InstructBLIP-Video) is ``num_query_tokens`` tokens, each
    one's box the whole image."""
    return QueryTokens.query_grids(part.config.num_query_tokens)


def processor(part: Any) -> Any:
    """``vlreg_processor``: InstructBLIP-Video's processor writes query tokens per frame given."""
    return per_frame if part.model_type == "instructblipvideo" else None


def per_frame(processor: Any) -> Any:
    """The loaded ``InstructBlipVideoProcessor`` as one that writes ``num_query_tokens`` placeholders
    per frame of each clip (`_written_per_frame`); any other processor (a caller's, or one
    already adapted) as it is."""
    from transformers import InstructBlipVideoProcessor

    if type(processor) is not InstructBlipVideoProcessor:
        return processor
    adapted = copy.copy(processor)
    adapted.__class__ = _per_frame_class()
    return adapted


@functools.cache
def _per_frame_class() -> type:
    """``InstructBlipVideoProcessor`` calling `_written_per_frame`, made when first asked for
    (the processor's module takes seconds to import)."""
    from transformers import InstructBlipVideoProcessor

    # a clip's frames are its images: the video processor is what processes them, and where vlreg reads or
    # sets the image processor's settings (a trace's options, the geometry), it is the one it reaches
    frames_processor = property(lambda self: self.video_processor,
                                lambda self, new: setattr(self, "video_processor", new))
    return type("PerFrameInstructBlipVideoProcessor", (InstructBlipVideoProcessor,),
                {"__call__": _written_per_frame, "image_processor": frames_processor, "__module__": __name__,
                 "__doc__": per_frame.__doc__})


def _written_per_frame(self: Any, images: Any = None, text: Any = None, **kwargs: Any) -> Any:
    """``InstructBlipVideoProcessor.__call__``, its run of ``num_query_tokens * 4`` placeholders
    in every row (and the same positions of every other row the tokenizer gave) made
    ``num_query_tokens`` per frame of the clips given, and the frames processed with the
    options given for them (the original hands its video processor none)."""
    from transformers import BatchFeature, InstructBlipVideoProcessor

    takes = set(getattr(self.video_processor.valid_kwargs, "__annotations__", {})) - {"return_tensors"}
    options = {key: kwargs.pop(key) for key in list(kwargs) if key in takes}
    for kind in ("images_kwargs", "videos_kwargs"):
        options.update(kwargs.pop(kind, None) or {})
    encoding = InstructBlipVideoProcessor.__call__(self, images=images, text=text, **kwargs)
    if images is not None and options:
        encoding["pixel_values"] = self.video_processor(images, return_tensors=kwargs.get("return_tensors"),
                                                        **options)["pixel_values"]
    if images is None or text is None:
        return encoding
    frames = len(encoding["pixel_values"][0])
    if frames == WRITTEN_FRAMES:
        return encoding
    token = self.tokenizer.convert_tokens_to_ids(self.video_token.content)
    written, wanted = self.num_query_tokens * WRITTEN_FRAMES, self.num_query_tokens * frames
    ids = encoding["input_ids"]
    starts = [list(row).index(token) for row in (ids.tolist() if hasattr(ids, "tolist") else ids)]
    rewritten = dict(encoding)
    for key, rows in encoding.items():
        if key in ("pixel_values", "qformer_input_ids", "qformer_attention_mask"):
            continue
        rows = rows.tolist() if hasattr(rows, "tolist") else rows
        rewritten[key] = [row[:start] + row[start : start + 1] * wanted + row[start + written :]
                          for row, start in zip(rows, starts)]
    return BatchFeature(rewritten, tensor_type=kwargs.get("return_tensors"))
