"""The processor, as a trace runs it: its options, its encoding, the images it takes.

What every part of vlreg that runs the processor shares (a trace, `vision.geometry`, the
helpers): the keywords a processor takes besides its inputs, a processor configured with
a trace's options, the encoding a trace makes, and the images in order however nested.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator, Sequence

import torch

#: The trace keywords that carry media to the processor.
MEDIA = frozenset({"images", "videos"})

#: What vlreg passes the processor itself.
OWN = frozenset({"text", "images", "videos", "return_tensors", "padding"})


def processor_options(processor: Any, modality: str | None = None) -> frozenset[str]:
    """Every keyword ``processor`` takes besides its inputs, as transformers merges them:
    the modality dicts (``images_kwargs=``, ...), the flat keys of each modality's typed
    kwargs, and its own preprocessors' (``max_pixels``, ``size``, ``do_image_splitting``).
    With ``modality`` (``"text_kwargs"``, ...), that modality's flat keys only."""
    if processor is None:
        return frozenset()
    typed = getattr(processor, "valid_processor_kwargs", None)
    annotations = dict(getattr(typed, "__annotations__", {}))
    found: set[str] = set(annotations) if modality is None else set()
    for kind, part in (("images_kwargs", "image_processor"), ("videos_kwargs", "video_processor"),
                       ("text_kwargs", "tokenizer"), ("audio_kwargs", "feature_extractor")):
        if modality not in (None, kind):
            continue
        found |= set(getattr(annotations.get(kind), "__annotations__", {}))
        found |= set(getattr(getattr(getattr(processor, part, None), "valid_kwargs", None), "__annotations__", {}))
    return frozenset(found - OWN - {"common_kwargs"})


def leaves(images: Any) -> list:
    """The images of ``images`` in order, however nested: a single image, a list of them,
    or a list per prompt (``[[a, b], [c]]``, the form SmolVLM's processor needs for
    several prompts)."""
    if not isinstance(images, (list, tuple)):
        return [images]
    return [leaf for item in images for leaf in leaves(item)]


def encode(processor: Any, prompt: "str | Sequence[str]", images: Sequence[Any], **options: Any) -> Any:
    """The processor's encoding of ``prompt`` and ``images`` as a trace makes it (several
    prompts padded, as `StandardizedTransformer` pads them), with the processor's
    ``options`` (``max_pixels=``, ...). ``images`` is handed over as the trace hands it,
    flat or a list per prompt."""
    if isinstance(prompt, (list, tuple)):
        if len(prompt) > 1:
            return processor(text=list(prompt), images=list(images), **options, padding=True, return_tensors="pt")
        prompt = prompt[0]
    return processor(text=prompt, images=list(images), **options, return_tensors="pt")


def configured(processor: Any, options: dict) -> Any:
    """``processor`` as it runs with ``options``: a copy whose image and video processors
    hold them, so a family's grids, which read those processors' settings (``size``, tiling,
    MiniCPM-V's slices of a frame), describe what the processor does with these options.
    ``processor`` itself is left as it is."""
    if not options:
        return processor
    import copy

    changed = copy.copy(processor)
    for kind, part in (("images_kwargs", "image_processor"), ("videos_kwargs", "video_processor")):
        settings = getattr(processor, part, None)
        flat = {key: value for key, value in options.items() if key in processor_options(processor, kind) and key != kind}
        flat.update(options.get(kind) or {})
        if not flat or settings is None:
            continue
        setattr(changed, part, type(settings).from_dict({**settings.to_dict(), **flat}))
        # A processor's own defaults for its image processor (InternVL's and Aya Vision's
        # crop_to_patches=True) win over the image processor's settings; the options win over both.
        defaults = getattr(processor, kind, None)
        if isinstance(defaults, dict):
            setattr(changed, kind, {**defaults, **{key: value for key, value in flat.items() if key in defaults}})
    return changed


def image_size(image: Any) -> tuple[int, int]:
    """``(width, height)`` of a PIL image, or of a numpy array or torch tensor in the
    layout vlreg documents (a numpy array ``height x width x channels``, a tensor
    ``channels x height x width``; either ``height x width``), which is how the processor
    is handed them (`for_processor`), whatever their sizes."""
    if hasattr(image, "size") and not callable(image.size) and not hasattr(image, "shape"):
        return tuple(image.size)
    shape = tuple(image.shape)
    if len(shape) == 2:
        return int(shape[1]), int(shape[0])
    if hasattr(image, "detach"):
        return int(shape[2]), int(shape[1])
    return int(shape[1]), int(shape[0])


def as_pil(image: Any) -> Any:
    """``image`` as a PIL image (the form a family's grids read sizes off), unchanged if it is one."""
    from PIL import Image

    if isinstance(image, Image.Image):
        return image
    width, height = image_size(image)
    return Image.new("RGB", (width, height))


#: PIL's modes of 16-bit grey: their RGB conversion clips every value past 255, so a
#: 16-bit image would reach the model all but white.
SIXTEEN_BIT = frozenset({"I;16", "I;16L", "I;16B", "I;16N"})


def as_rgb(image: Any) -> Any:
    """``image`` with three colour channels, as transformers' processors make a PIL image RGB
    (grey repeated, transparency laid over white), so a processor that converts nothing
    (LFM2-VL's, Janus's) gets the three channels its normalization expects, and a grey or
    transparent array the pixels of the same PIL image: a PIL image of another mode (a
    16-bit grey one scaled to 8 bits), a uint8 numpy array ``height x width`` or with 1, 2
    or 4 channels last, a uint8 tensor with them first. A numpy array is made contiguous
    (a flipped view has negative strides, which torch takes nowhere). Anything else is
    returned as it is."""
    import numpy
    import torch
    from PIL import Image

    if isinstance(image, Image.Image):
        if image.mode == "RGB":
            return image
        if image.mode in SIXTEEN_BIT:
            image = Image.fromarray((numpy.asarray(image).astype(numpy.uint16) >> 8).astype(numpy.uint8))
        if "A" in image.getbands() or "transparency" in image.info:
            rgba = image.convert("RGBA")
            return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
        return image.convert("RGB")
    tensor = isinstance(image, torch.Tensor)
    pixels = image.detach().cpu().numpy() if tensor else image
    if not isinstance(pixels, numpy.ndarray):
        return image
    if tensor and pixels.ndim == 3:
        pixels = numpy.moveaxis(pixels, 0, -1)
    grey = pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[-1] in (1, 2, 4))
    if pixels.dtype != numpy.uint8 or not grey:
        return image if tensor else numpy.ascontiguousarray(image)
    pixels = numpy.ascontiguousarray(pixels[..., 0] if pixels.ndim == 3 and pixels.shape[-1] == 1 else pixels)
    rgb = numpy.asarray(as_rgb(Image.fromarray(pixels)))
    return torch.from_numpy(numpy.ascontiguousarray(numpy.moveaxis(rgb, -1, 0))) if tensor else rgb


_ALONE: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def takes_text_alone(processor: Any) -> bool:
    """Whether ``processor`` encodes a prompt given no image, as a text-only trace calls it
    (PaliGemma's refuses one), asked once per processor."""
    try:
        return _ALONE[processor]
    except (KeyError, TypeError):
        pass
    try:
        processor(text=["Hello"], return_tensors="pt")
    except ValueError:
        found = False
    else:
        found = True
    try:
        _ALONE[processor] = found
    except TypeError:  # not weakly referable: asked again next time
        pass
    return found


def indexed(images: Any, where: str) -> Iterator[tuple[str, Any]]:
    """`leaves`, each with where it sits (``[1][0]``) after ``where``."""
    if isinstance(images, (list, tuple)):
        for index, item in enumerate(images):
            yield from indexed(item, f"{where}[{index}]")
    else:
        yield where, images


#: Image heights transformers' processors take for a channel axis when they guess where
#: the channels are: a ``height x width x 3`` array 1, 3 or 4 rows tall is read as
#: channels first, its rows as colours.
AMBIGUOUS = (1, 3, 4)


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
