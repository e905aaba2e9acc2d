"""What a trace checks of its input before the model runs.

An image the model would never see must not pass silently: images given to a load with
no processor, an empty or malformed ``images=``, float pixels in 0..1 that the image
processor would divide by 255 again. Each is refused with what to pass instead.
"""

from __future__ import annotations

from typing import Any

import torch

from .placeholders import check_placeholders, no_images, prompt_texts
from .processing import AMBIGUOUS, MEDIA, image_size, indexed, leaves, takes_text_alone

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
            no_images(model, prompts, media)
    carrying = [kwargs["images"] for _, kwargs in invokes if kwargs.get("images") is not None]
    if len(carrying) > 1:  # every invoke's images go through one processor call
        _together(carrying, model.__dict__.get("vision"), "the invokes' images")
    texts = [prompt_texts(inputs[0] if inputs else kwargs.get("text")) for inputs, kwargs in invokes]
    pixels = any(kwargs.get("pixel_values") is not None for _, kwargs in invokes)
    if not carrying and not pixels and model.processor is not None and None not in texts:
        if not takes_text_alone(model.processor):  # PaliGemma's: transformers' words, deep in the pipeline
            raise ValueError(
                f"this model's processor ({type(model.processor).__name__}) takes no prompt without an image: pass "
                f"images=[...] with it, or load with task='text-generation' (the default) to trace text alone")


def check_encoding(model: Any, encoding: dict) -> None:
    """Refuse, after the processor and before the model, an encoding the family says its
    forward cannot run (`Vision.encoding_refusal`)."""
    vision = model.__dict__.get("vision")
    why = vision.encoding_refusal(encoding) if vision is not None else None
    if why:
        raise ValueError(f"this input cannot run on {type(model._module).__name__}: {why}")


def _reads_videos(processor: Any) -> None:
    """Refuse ``videos=`` where the processor has no video processor: it would drop the
    frames and the trace would run on the text alone."""
    if getattr(processor, "video_processor", None) is None:
        raise ValueError(
            f"videos= given, but this model's processor ({type(processor).__name__}) reads no videos (it has no "
            f"video processor), so the frames would be dropped and the trace run on the text alone: pass a "
            f"video's frames as images=[...], one per image placeholder"
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
    if isinstance(images, (list, tuple)) and not any(True for _ in leaves(images)):
        raise ValueError(f"images={images!r} holds no image: leave images= out for a text-only prompt; {ACCEPTED}")
    rescale = getattr(getattr(processor, "image_processor", None), "do_rescale", False)
    from PIL import Image

    _together(images, vision, "images=")
    for where, image in indexed(images, "images"):
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


def _together(images: Any, vision: Any, what: str) -> None:
    """Refuse images one processor call cannot take together (`Vision.images_refusal`)."""
    pictures = [image for image in leaves(images) if _is_image(image)]
    if vision is None or len(pictures) < 2:
        return
    why = vision.images_refusal([image_size(image) for image in pictures])
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
