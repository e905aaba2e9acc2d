"""What a trace checks of its input before the model runs.

An image the model would never see must not pass silently: images given to a load with
no processor, an empty or malformed ``images=``, float pixels in 0..1 that the image
processor would divide by 255 again. Each is refused with what to pass instead.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import torch

from .processing import MEDIA

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
    for inputs, kwargs in invokes:
        media = {key for key in kwargs.keys() & MEDIA if kwargs[key] is not None}
        if media and model.processor is None:
            raise ValueError(
                f"{' and '.join(sorted(media))}= given to a model loaded without a processor "
                f"(task={model.task!r}), so no image can reach it and the result would be the "
                f"text-only one: load with task='image-text-to-text' to trace images"
            )
        if kwargs.get("images") is not None:
            check_images(kwargs["images"], model.processor, takes_arrays(model))
            check_placeholders(model, inputs[0] if inputs else kwargs.get("text"), kwargs["images"])


def check_placeholders(model: Any, prompts: Any, images: Any) -> None:
    """Refuse prompts whose image placeholders (the processor's ``image_token``) are not
    one per image: some processors fail deep inside on it, or pair the images wrongly
    (NemotronH Omni's). A prompt with no placeholder is left to the processor (PaliGemma's
    puts them in itself). Prompts that are not text (an encoding) are not counted."""
    vision = model.__dict__.get("vision")
    writes, runs = getattr(vision, "writes_placeholders", False), getattr(vision, "placeholder_runs", False)
    token = getattr(model.processor, "image_token", None) or (_named(model) if writes or runs else None)
    token = getattr(token, "content", token)  # BLIP-2's processor keeps an AddedToken
    if images is None or not isinstance(token, str) or not token:
        return
    prompts = [prompts] if isinstance(prompts, str) else prompts
    if not isinstance(prompts, (list, tuple)) or not all(isinstance(prompt, str) for prompt in prompts):
        return
    counts = [len(re.findall(f"(?:{re.escape(token)})+", prompt)) if runs else prompt.count(token) for prompt in prompts]
    if writes:
        _none_written(counts, token)
        if getattr(vision, "clips", False):
            _one_clip_a_prompt(prompts, images)
        else:
            _one_image_a_prompt(prompts, len(list(_leaves(images))))
        return
    if sum(counts) == 0:
        return
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


def check_images(images: Any, processor: Any, arrays: bool = True) -> None:
    """Refuse an ``images=`` that the processor would fail on deep inside, or misread;
    with ``arrays`` False, any image but a PIL one (the processor takes no other)."""
    if isinstance(images, (list, tuple)) and not any(True for _ in _leaves(images)):
        raise ValueError(f"images={images!r} holds no image: leave images= out for a text-only prompt; {ACCEPTED}")
    rescale = getattr(getattr(processor, "image_processor", None), "do_rescale", False)
    from PIL import Image

    for where, image in _indexed(images, "images"):
        if not _is_image(image):
            raise TypeError(f"{where} is {type(image).__name__}, not an image: {ACCEPTED}")
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


def for_processor(images: Any, processor: Any) -> Any:
    """``images`` as the processor takes them: as they are, but for an image processor of
    transformers' older kind (neither the torchvision nor the PIL backend: Emu3's), whose
    RGB conversion takes PIL images and numpy arrays only and fails deep inside on a torch
    tensor; each tensor is handed to it as the numpy array of the same pixels and layout."""
    from transformers.image_processing_backends import PilBackend, TorchvisionBackend

    image_processor = getattr(processor, "image_processor", None)
    if images is None or image_processor is None or isinstance(image_processor, (PilBackend, TorchvisionBackend)):
        return images
    if isinstance(images, (list, tuple)):
        return [for_processor(image, processor) for image in images]
    return images.detach().cpu().numpy() if isinstance(images, torch.Tensor) else images


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
