"""Placeholders and images must meet: a prompt's image placeholders counted against the
images given, before the processor runs, so an image is never dropped or a placeholder
read as text (`check_placeholders`, and `no_images` for a prompt given none)."""

from __future__ import annotations

import re
from typing import Any

from .markers import warn_unmarked
from .processing import leaves


def placeholder_token(model: Any, named: bool = False) -> str | None:
    """The processor's image placeholder as a prompt holds it: the token its chat template
    writes where the processor expands it into others (Qianfan-OCR's ``<image>``,
    ``image_placeholder_token``), else its ``image_token``; with ``named``, where the
    processor names none, the tokenizer's name for the model's placeholder id (`_named`)."""
    processor = model.processor
    token = getattr(processor, "image_placeholder_token", None) or getattr(processor, "image_token", None)
    token = token or (_named(model) if named else None)
    token = getattr(token, "content", token)  # BLIP-2's processor keeps an AddedToken
    return token if isinstance(token, str) and token else None


def prompt_texts(prompts: Any) -> list[str] | None:
    """The prompts as a list of text, or ``None`` where they are not text (an encoding)."""
    prompts = [prompts] if isinstance(prompts, str) else prompts
    if not isinstance(prompts, (list, tuple)) or not all(isinstance(prompt, str) for prompt in prompts):
        return None
    return list(prompts)


def _count(prompt: str, token: str, runs: bool) -> int:
    """The placeholders in ``prompt``; with ``runs``, a run of the token is one (`Vision.placeholder_runs`)."""
    return len(re.findall(f"(?:{re.escape(token)})+", prompt)) if runs else prompt.count(token)


def no_images(model: Any, prompts: Any, media: set) -> None:
    """Refuse prompts that hold image placeholders given no image: the processor would
    embed each as the text of its token (Idefics2's does, and the model runs on them
    silently), or fail deep inside."""
    vision = model.__dict__.get("vision")
    runs = getattr(vision, "placeholder_runs", False)
    token, texts = placeholder_token(model, named=runs or getattr(vision, "writes_placeholders", False)), prompt_texts(prompts)
    if token is None or texts is None:
        return
    held = sum(_count(prompt, token, runs) for prompt in texts)
    if held:
        given = f"only {' and '.join(sorted(media))}=" if media else "no images="
        raise ValueError(
            f"the prompt{'s hold' if len(texts) > 1 else ' holds'} {held} image placeholder{'s' if held != 1 else ''} "
            f"({token!r}) and {given} was given, so no image would reach {'them' if held != 1 else 'it'} (the "
            f"placeholders would be read as text): pass images=[...], one per placeholder, or take the "
            f"placeholders out of a text-only prompt"
        )


def check_placeholders(model: Any, prompts: Any, images: Any) -> None:
    """Refuse prompts whose image placeholders (the processor's ``image_token``) are not
    one per image: some processors fail deep inside on it, or pair the images wrongly
    (NemotronH Omni's). A prompt with no placeholder is left to a processor that puts
    them in itself (PaliGemma's) and refused for any other, saying how to write one; a
    placeholder without the markers the chat template writes around it is warned about.
    Where the processor writes the placeholders (`Vision.writes_placeholders`) a prompt
    holds none; where they come in runs (`Vision.placeholder_runs`) a run is one image.
    Prompts that are not text (an encoding) are not counted."""
    vision = model.__dict__.get("vision")
    writes, runs = getattr(vision, "writes_placeholders", False), getattr(vision, "placeholder_runs", False)
    token, prompts = placeholder_token(model, named=writes or runs), prompt_texts(prompts)
    if images is None or token is None or prompts is None:
        return
    counts = [_count(prompt, token, runs) for prompt in prompts]
    if writes:
        _none_written(counts, token)
        if getattr(vision, "clips", False):
            _one_clip_a_prompt(prompts, images)
        else:
            _one_image_a_prompt(prompts, len(list(leaves(images))))
        return
    if sum(counts) == 0:
        _placed_by_the_processor(model, prompts, images, token)
        return
    warn_unmarked(model.processor, prompts, token)
    nested = isinstance(images, (list, tuple)) and len(prompts) > 1 and len(images) == len(prompts) and all(
        isinstance(each, (list, tuple)) for each in images)
    given = [len(list(leaves(each))) for each in images] if nested else [len(list(leaves(images)))]
    held = counts if nested else [sum(counts)]
    for index, (placeholders, pictures) in enumerate(zip(held, given)):
        if placeholders != pictures:
            where = f"prompt {index}" if nested else ("the prompt" if len(prompts) == 1 else "the prompts")
            raise ValueError(
                f"{where} {'holds' if nested or len(prompts) == 1 else 'hold'} {placeholders} image "
                f"placeholder{'s' if placeholders != 1 else ''} ({token!r}), but {pictures} image"
                f"{'s were' if pictures != 1 else ' was'} given: pass one image per placeholder, in order "
                f"(a list per prompt when several prompts carry images), or put one placeholder per image in "
                f"the prompt (the chat template writes one for each {{'type': 'image'}} entry)"
            )


def _placed_by_the_processor(model: Any, prompts: list, images: Any, token: str) -> None:
    """Prompts with images and no placeholder: taken where the processor writes the
    placeholders itself (PaliGemma's), refused where it fails on them or writes none."""
    from .processing import encode, for_processor

    try:
        encoding = encode(model.processor, prompts, for_processor(images, model.processor))
        placed = bool((encoding["input_ids"] == model.image_token_id).any())
    except Exception as error:  # the processor's own failure ("Found total 0 ... tokens"), said in vlreg's words below
        placed, cause = False, error
    else:
        cause = None
    if placed:
        return
    tokenizer = getattr(model.processor, "tokenizer", None)
    owner = next((f"model.{name}" for name, part in (("processor", model.processor), ("tokenizer", tokenizer))
                  if getattr(part, "chat_template", None)), None)
    if owner is None:  # Chameleon's: no chat template to point to
        raise ValueError(f"the prompt holds no image placeholder ({token!r}), so the images have nowhere to go, and "
                         f"this model has no chat template to write one: put {token} where each image goes "
                         f"('{token}What is in this image?')") from cause
    raise ValueError(
        f"the prompt holds no image placeholder ({token!r}), so the images have nowhere to go: write the prompt "
        f"with the chat template, an {{'type': 'image'}} entry where each image goes ({owner}."
        f"apply_chat_template([{{'role': 'user', 'content': [{{'type': 'image'}}, {{'type': 'text', 'text': "
        f"'...'}}]}}], add_generation_prompt=True, tokenize=False)), or put {token} where each image goes"
    ) from cause


def _named(model: Any) -> str | None:
    """The placeholder's text where the processor names none: the tokenizer's name for
    `StandardizedTransformer.image_token_id` (InstructBLIP-Video's ``<video>``,
    PP-Chart2Table's ``<imgpad>``)."""
    tokenizer, token_id = getattr(model.processor, "tokenizer", None), model.image_token_id
    return tokenizer.convert_ids_to_tokens(token_id) if tokenizer is not None and token_id is not None else None


def _none_written(counts: list, token: str) -> None:
    """Where the processor writes each image's placeholders itself, before its prompt's
    text (Florence-2's: `Vision.writes_placeholders`), a prompt holds none."""
    if any(counts):
        index = next(i for i, count in enumerate(counts) if count)
        raise ValueError(
            f"prompt {index} holds {counts[index]} image placeholder{'s' if counts[index] != 1 else ''} ({token!r}), "
            f"but this processor writes each image's placeholders itself, before the prompt's text: leave them out "
            f"(a task token such as '<CAPTION>', or plain text, is the whole prompt)"
        )


def _one_image_a_prompt(prompts: list, pictures: int) -> None:
    """Where the processor writes each image's placeholders itself, a prompt takes one image."""
    if pictures != len(prompts):
        raise ValueError(
            f"{pictures} image{'s were' if pictures != 1 else ' was'} given for {len(prompts)} prompt"
            f"{'s' if len(prompts) != 1 else ''}: this processor writes one image's placeholders before each "
            f"prompt, so pass one image per prompt"
        )


def _one_clip_a_prompt(prompts: list, images: Any) -> None:
    """Where a prompt's images are one clip's frames (InstructBLIP-Video's: `Vision.clips`),
    a prompt takes any number of them; several prompts take a list of frames each, every
    clip as long (the video processor stacks them)."""
    if len(prompts) == 1:
        return
    nested = isinstance(images, (list, tuple)) and len(images) == len(prompts) and all(
        isinstance(each, (list, tuple)) for each in images)
    if not nested:
        raise ValueError(
            f"{len(prompts)} prompts were given, and each takes the frames of one clip: pass a list of frames per "
            f"prompt (images=[[frame, ...], [frame, ...]]), in the prompts' order"
        )
    lengths = [len(list(leaves(each))) for each in images]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"the prompts' clips have {lengths} frames: the video processor stacks one batch's clips, so give "
            f"every prompt as many frames, or trace them apart"
        )
