"""Several invokes in one trace, images and videos included, as one invoke of a padded encoding.

nnsight batches invokes whose input is text and refuses ones that carry images (the
processor must see every prompt and every image at once to pad them). vlreg combines
them itself: every invoke's prompts, one row each, in invoke order, and each prompt's
images as a nested list (``images=[[...], [], [...]]``), through the processor with
padding on the tokenizer's side (the left, for these decoders). Each invoke then owns the
batch rows nnsight gave it (`vlreg.core.serving.batching` cuts the values for it). Every
row must hold as many tokens as the invoke's own encoding gives it: where the nested list
changes how the processor expands a prompt's images (LLaVA-OneVision does not tile an
image that shares its list), the images go as one flat list, and where neither form
agrees with every invoke, the trace is refused. Videos go as one flat list in invoke order
(a video is itself a list of frames, so a list per prompt would be read as more videos): the
processor hands them to the video placeholders in the order the prompts hold them.
"""

from __future__ import annotations

from typing import Any

from .processing import MEDIA, leaves


def combine(processor: Any, invokes: list, options: dict | None = None, flat: bool = False) -> list:
    """Several invokes, at least one carrying images, as one invoke of a padded encoding
    (with the processor's ``options``); other inputs are left to nnsight. With ``flat``, the
    processor takes the images as one flat list only (`Vision.flat_images`)."""
    options = options or {}
    if len(invokes) < 2 or not any(kwargs.keys() & MEDIA for _, kwargs in invokes):
        return invokes
    texts: list = []
    images: list = []
    videos: list = []  # flat, in invoke order: the processor gives them to the video placeholders in text order
    alone: list = []
    rest: dict = {}
    for inputs, kwargs in invokes:
        prompts = inputs[0] if inputs else kwargs.get("text")
        if not isinstance(prompts, (str, list, tuple)):
            raise ValueError(
                "invokes that carry images take prompts as text (a string, or a list of strings): "
                f"got {type(prompts).__name__}"
            )
        given, moving = kwargs.get("images"), list(kwargs.get("videos") or [])
        media = {"videos": moving} if moving else {}
        alone += _lengths(processor(text=prompts, images=leaves(given) if flat and given is not None else given,
                                    **media, **options, padding=True, return_tensors="pt"))
        videos += moving
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        per_prompt = _per_prompt(given, len(prompts))
        texts += prompts
        images += per_prompt
        rest.update({key: value for key, value in kwargs.items() if key not in MEDIA | {"text"}})
    flattened = [image for each in images for image in each]
    media = {"videos": videos} if videos else {}
    forms = (flattened,) if flat else (images, flattened) if any(len(each) > 1 for each in images) else (images,)
    for form in forms if flattened else (None,):
        encoding = processor(text=texts, images=form, **media, **options, padding=True, return_tensors="pt")
        if _lengths(encoding) in (None, alone):
            return [((), {**encoding, **rest})]
    raise ValueError(
        "the processor encodes these invokes' images differently together than each invoke alone "
        "(LLaVA-OneVision tiles an image only when it is its prompt's one image in a list per "
        "prompt): trace the invokes one at a time"
    )


def _lengths(encoding: Any) -> list | None:
    """Each row's tokens, padding left out: how the processor expanded its images."""
    mask = encoding.get("attention_mask")
    return None if mask is None else mask.sum(-1).tolist()


def _per_prompt(images: Any, prompts: int) -> list:
    """An invoke's ``images=`` as a list per prompt: one prompt takes them all; several
    take a nested list (one list per prompt), as the processor does."""
    if images is None:
        return [[] for _ in range(prompts)]
    images = list(images) if isinstance(images, (list, tuple)) else [images]
    if prompts == 1:
        return [images if not (images and isinstance(images[0], (list, tuple))) else list(images[0])]
    if len(images) != prompts or not all(isinstance(each, (list, tuple)) for each in images):
        raise ValueError(
            f"an invoke of {prompts} prompts takes images= as a list per prompt ({prompts} lists, [] for a "
            f"prompt with none), so each image lands in its own prompt"
        )
    return [list(each) for each in images]
