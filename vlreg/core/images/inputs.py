"""What a trace checks of its input before the model runs.

An image the model would never see must not pass silently: images given to a load with
no processor, an empty or malformed ``images=``, float pixels in 0..1 that the image
processor would divide by 255 again. Each is refused with what to pass instead.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import torch

from .markers import warn_unmarked
from .processing import MEDIA, as_rgb, image_size, takes_text_alone

ACCEPTED = (
    "images= takes a PIL image, a numpy array (height x width x 3, uint8) or a torch tensor "
    "(3 x height x width), one per image placeholder in the prompt, as a list (a list per "
    "prompt when several prompts carry images)"
)


def check_invokes(model: Any, invokes: list) -> None:
    """Refuse what no image can reach or what would reach it wrong, and what the family's
    entry refuses (`Entry.check_invokes`)."""
    entry = model.family.entry
    if entry is not None:
        entry.check_invokes(model, invokes)
        given = {key for _, kwargs in invokes for key in kwargs.keys() & MEDIA if kwargs[key] is not None}
        if entry.apart is not None and given == MEDIA:
            raise ValueError(f"images and videos in one trace: {entry.apart}; trace them apart")
    for inputs, kwargs in invokes:
        media = {key for key in kwargs.keys() & MEDIA if kwargs[key] is not None}
        if media and model.processor is None:
            raise ValueError(
                f"{' and '.join(sorted(media))}= given to a model loaded without a processor "
                f"(task={model.task!r}), so no image can reach it and the result would be the "
                f"text-only one: load with task='image-text-to-text' to trace images"
            )
        if kwargs.get("videos") is not None and model.processor is not None:
            _reads_videos(model.processor)
        prompts = inputs[0] if inputs else kwargs.get("text")
        if kwargs.get("images") is not None:
            check_images(kwargs["images"], model.processor, takes_arrays(model), model.__dict__.get("vision"))
            check_placeholders(model, prompts, kwargs["images"])
        elif model.processor is not None and kwargs.get("pixel_values") is None:
            _no_images(model, prompts, media)
    carrying = [kwargs["images"] for _, kwargs in invokes if kwargs.get("images") is not None]
    if len(carrying) > 1:  # every invoke's images go through one processor call
        _together(carrying, model.__dict__.get("vision"), "the invokes' images")
    texts = [_texts(inputs[0] if inputs else kwargs.get("text")) for inputs, kwargs in invokes]
    pixels = any(kwargs.get("pixel_values") is not None for _, kwargs in invokes)
    if not carrying and not pixels and model.processor is not None and None not in texts:
        if not takes_text_alone(model.processor):  # PaliGemma's: transformers' words, deep in the pipeline
            raise ValueError(
                f"this model's processor ({type(model.processor).__name__}) takes no prompt without an image: pass "
                f"images=[...] with it, or load with task='text-generation' (the default) to trace text alone")


def _reads_videos(processor: Any) -> None:
    """Refuse ``videos=`` where the processor has no video processor: it would drop the
    frames and the trace would run on the text alone."""
    if getattr(processor, "video_processor", None) is None:
        raise ValueError(
            f"videos= given, but this model's processor ({type(processor).__name__}) reads no videos (it has no "
            f"video processor), so the frames would be dropped and the trace run on the text alone: pass a "
            f"video's frames as images=[...], one per image placeholder"
        )


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


def _texts(prompts: Any) -> list[str] | None:
    """The prompts as a list of text, or ``None`` where they are not text (an encoding)."""
    prompts = [prompts] if isinstance(prompts, str) else prompts
    if not isinstance(prompts, (list, tuple)) or not all(isinstance(prompt, str) for prompt in prompts):
        return None
    return list(prompts)


def _count(prompt: str, token: str, runs: bool) -> int:
    """The placeholders in ``prompt``; with ``runs``, a run of the token is one (`Vision.placeholder_runs`)."""
    return len(re.findall(f"(?:{re.escape(token)})+", prompt)) if runs else prompt.count(token)


def _no_images(model: Any, prompts: Any, media: set) -> None:
    """Refuse prompts that hold image placeholders given no image: the processor would
    embed each as the text of its token (Idefics2's does, and the model runs on them
    silently), or fail deep inside."""
    vision = model.__dict__.get("vision")
    runs = getattr(vision, "placeholder_runs", False)
    token, texts = placeholder_token(model, named=runs or getattr(vision, "writes_placeholders", False)), _texts(prompts)
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
    token, prompts = placeholder_token(model, named=writes or runs), _texts(prompts)
    if images is None or token is None or prompts is None:
        return
    counts = [_count(prompt, token, runs) for prompt in prompts]
    if writes:
        _none_written(counts, token)
        if getattr(vision, "clips", False):
            _one_clip_a_prompt(prompts, images)
        else:
            _one_image_a_prompt(prompts, len(list(_leaves(images))))
        return
    if sum(counts) == 0:
        _placed_by_the_processor(model, prompts, images, token)
        return
    warn_unmarked(model.processor, prompts, token)
    nested = isinstance(images, (list, tuple)) and len(prompts) > 1 and len(images) == len(prompts) and all(
        isinstance(each, (list, tuple)) for each in images)
    given = [len(list(_leaves(each))) for each in images] if nested else [len(list(_leaves(images)))]
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
    from .processing import encode

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
    lengths = [len(list(_leaves(each))) for each in images]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"the prompts' clips have {lengths} frames: the video processor stacks one batch's clips, so give "
            f"every prompt as many frames, or trace them apart"
        )


def takes_flat(model: Any) -> bool:
    """Whether the model's processor takes a batch's images as one flat list (`Vision.flat_images`)."""
    return getattr(model.__dict__.get("vision"), "flat_images", False)


def takes_arrays(model: Any) -> bool:
    """Whether the model's processor takes numpy arrays and torch tensors as images
    (`Vision.takes_arrays`)."""
    return getattr(model.__dict__.get("vision"), "takes_arrays", True)


def check_images(images: Any, processor: Any, arrays: bool = True, vision: Any = None) -> None:
    """Refuse an ``images=`` that the processor would fail on deep inside, or misread;
    with ``arrays`` False, any image but a PIL one (the processor takes no other); with
    the model's ``vision``, an image of a size it refuses (`Vision.image_refusal`)."""
    if isinstance(images, (list, tuple)) and not any(True for _ in _leaves(images)):
        raise ValueError(f"images={images!r} holds no image: leave images= out for a text-only prompt; {ACCEPTED}")
    rescale = getattr(getattr(processor, "image_processor", None), "do_rescale", False)
    from PIL import Image

    _together(images, vision, "images=")
    for where, image in _indexed(images, "images"):
        if not _is_image(image):
            raise TypeError(f"{where} is {type(image).__name__}, not an image: {ACCEPTED}")
        _check_layout(where, image)
        if vision is not None:
            width, height = image_size(image)
            why = vision.image_refusal(width, height)
            if why:
                raise ValueError(f"{where} is {width} x {height} pixels, too small or too thin for this model: {why}")
        if not arrays and not isinstance(image, Image.Image):
            raise TypeError(
                f"{where} is a {type(image).__name__}, and this model's processor ({type(processor).__name__}) "
                f"takes PIL images only: pass PIL.Image.fromarray(array) (height x width x 3, uint8), or a "
                f"tensor as PIL.Image.fromarray(tensor.permute(1, 2, 0).numpy())"
            )
        if rescale and _unit_floats(image):
            raise ValueError(
                f"{where} is a float array with values in [0, 1], and the image processor divides "
                f"pixel values by 255 as if they ran 0..255, which would feed the model an all but "
                f"black image: pass uint8 values 0..255 (e.g. (array * 255).round().astype('uint8')) "
                f"or a PIL image"
            )


#: Image heights transformers' processors take for a channel axis when they guess where
#: the channels are: a ``height x width x 3`` array 1, 3 or 4 rows tall is read as
#: channels first, its rows as colours.
AMBIGUOUS = (1, 3, 4)


def _together(images: Any, vision: Any, what: str) -> None:
    """Refuse images one processor call cannot take together (`Vision.images_refusal`)."""
    leaves = [image for image in _leaves(images) if _is_image(image)]
    if vision is None or len(leaves) < 2:
        return
    why = vision.images_refusal([image_size(image) for image in leaves])
    if why:
        raise ValueError(f"{what} cannot go through the processor together: {why}")


def _check_layout(where: str, image: Any) -> None:
    """Refuse an array or tensor whose channel axis is not where vlreg documents it (a
    numpy array's last, a tensor's first), which the processor would read otherwise."""
    shape = tuple(getattr(image, "shape", ()))
    if len(shape) != 3:
        return
    tensor = isinstance(image, torch.Tensor)
    channels, other = (shape[0], shape[-1]) if tensor else (shape[-1], shape[0])
    if channels not in AMBIGUOUS and other in AMBIGUOUS:
        kind, fix = (("torch tensor", "channels first (3 x height x width): pass tensor.permute(2, 0, 1)") if tensor
                     else ("numpy array", "channels last (height x width x 3): pass array.transpose(1, 2, 0)"))
        raise ValueError(f"{where} is a {kind} of shape {shape}, and vlreg takes a {kind} {fix}")


def for_processor(images: Any, processor: Any) -> Any:
    """``images`` as the processor takes them, in the layouts vlreg documents, which no
    processor can misread: a numpy array is ``height x width x channels``, a torch tensor
    ``channels x height x width``, whatever their sizes.

    transformers' image processors guess the channel axis from the sizes and take a first
    axis of 1, 3 or 4 for it, so a numpy array (or, in the older processors, a PIL image)
    1, 3 or 4 rows tall would be read with its rows as colours: such an array is handed
    over channels first (a tensor to the torchvision and PIL backends; a numpy array, like
    such a PIL image, to the older kind), where the guess is right. An image processor of
    that older kind (Emu3's) also takes no torch tensor (its RGB conversion fails deep
    inside on one): each is handed to it as the numpy array of the same pixels and layout.
    Every image has three colour channels by then (`as_rgb`: grey, transparent and 16-bit
    images as the PIL image of them made RGB)."""
    from transformers.image_processing_backends import PilBackend, TorchvisionBackend

    image_processor = getattr(processor, "image_processor", None)
    if images is None or image_processor is None:
        return images
    if isinstance(images, (list, tuple)):
        return [for_processor(image, processor) for image in images]
    backend = isinstance(image_processor, (PilBackend, TorchvisionBackend))
    images = as_rgb(images)
    if isinstance(images, torch.Tensor):
        return images if backend else images.detach().cpu().numpy()
    import numpy

    if isinstance(images, numpy.ndarray) and images.ndim == 3 and images.shape[0] in AMBIGUOUS:
        first = numpy.ascontiguousarray(numpy.moveaxis(images, -1, 0))
        return torch.from_numpy(first) if backend else first
    if not backend and _is_pil(images) and images.height in AMBIGUOUS:
        rgb = images.convert("RGB") if getattr(image_processor, "do_convert_rgb", True) else images
        return numpy.ascontiguousarray(numpy.moveaxis(numpy.asarray(rgb), -1, 0))
    return images


def _is_pil(image: Any) -> bool:
    from PIL import Image

    return isinstance(image, Image.Image)


def _leaves(images: Any) -> Iterator[Any]:
    for _, image in _indexed(images, ""):
        yield image


def _indexed(images: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(images, (list, tuple)):
        for index, item in enumerate(images):
            yield from _indexed(item, f"{where}[{index}]")
    else:
        yield where, images


def _is_image(image: Any) -> bool:
    from PIL import Image

    if isinstance(image, Image.Image):
        return True
    if isinstance(image, torch.Tensor):
        return image.dim() in (2, 3)
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with torch
        return False
    return isinstance(image, numpy.ndarray) and image.ndim in (2, 3)


def _unit_floats(image: Any) -> bool:
    """Float pixels, some above 0 and none above 1: a 0..1 image."""
    tensor = image if isinstance(image, torch.Tensor) else None
    if tensor is None and hasattr(image, "dtype") and getattr(image.dtype, "kind", "") == "f":
        tensor = torch.as_tensor(image)
    if tensor is None or not tensor.is_floating_point() or tensor.numel() == 0:
        return False
    return bool(tensor.min() >= 0 and 0 < tensor.max() <= 1)


def in_weights_dtype(inputs: dict, dtype: torch.dtype) -> dict:
    """The input's floating-point tensors (pixels, audio features) in the weights' dtype,
    as transformers' pipelines pass them. A processor may emit another dtype than the
    load's (Llama 4's gives bfloat16 pixels whatever the weights), and a tower that does
    not cast them fails deep inside its first matrix product; integer inputs (ids, masks,
    grids) are left as they are."""
    if not dtype.is_floating_point:
        return inputs
    return {key: value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != dtype
            else value for key, value in inputs.items()}
