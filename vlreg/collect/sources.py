"""Where `collect`'s images and videos come from: a folder, a list, a mapping, or a Hugging Face dataset.

Each becomes a list of `Item`: a unique name (the key the store records: a file's path
relative to the folder, a path as given, a list's position, a mapping's key, a dataset's
key column or row number), a way to load the image when its batch runs (so memory holds
one batch of images, whatever the number), and the record a prompt function is given.
Files are checked before any work by opening their headers (`unreadable`); an image that
fails to decode later is handled the same way, by the run's ``on_error``. A file with a
video's extension (`videos.VIDEO_EXTENSIONS`) is a video item, decoded into a `Clip`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from attrs import field, frozen

from ..core.images.processing import as_rgb
from .videos import decode, is_video, probe


@frozen
class Item:
    name: str
    load: Callable[[], Any] = field(eq=False, repr=False)
    record: dict = field(factory=dict, eq=False, repr=False)
    file: Path | None = None
    kind: str = "image"  # or "video": a video file


def image_extensions() -> set[str]:
    from PIL import Image

    return {extension.lower() for extension in Image.registered_extensions()}


def items(images: Any, *, image_column: str = "image", key_column: str | None = None) -> list[Item]:
    """``images`` as `Item` in order; refuses an empty source and repeated names."""
    if isinstance(images, (str, os.PathLike)):
        found = _folder(Path(images))
    elif _is_dataset(images):
        found = _dataset(images, image_column, key_column)
    elif isinstance(images, Mapping):
        found = [_item(str(name), image) for name, image in images.items()]
    elif isinstance(images, (list, tuple)):
        found = [_item(str(image) if isinstance(image, (str, os.PathLike)) else str(index), image)
                 for index, image in enumerate(images)]
    else:
        raise TypeError(f"images= takes a folder, a list of image files or images, a mapping of names to either, "
                        f"or a Hugging Face dataset with an image column, not {type(images).__name__}")
    if not found:
        raise ValueError(f"no images in {images!r}: there is nothing to collect" if not isinstance(images, (str, os.PathLike))
                         else f"no images in {images}: it holds no file with an image extension "
                              f"(.png, .jpg, .jpeg, .webp, ...) or a video's (.mp4, .webm, .mkv, ...)")
    names: dict[str, int] = {}
    for item in found:
        if item.name in names:
            raise ValueError(f"two images are named {item.name!r}: the store keys rows by image name, so each "
                             f"needs its own (a mapping of names to images gives them)")
        names[item.name] = 1
    return found


def unreadable(item: Item, refusal: Callable[[int, int], "str | None"] | None = None,
               videos: str | None = None) -> str | None:
    """Why ``item``'s file cannot be read as an image or a video (its header), or cannot
    run on the model (``refusal`` of its size, as the EXIF orientation turns it:
    `Vision.image_refusal`; ``videos``, why the model reads no video), or ``None``; images in
    memory and dataset rows are decoded when their batch runs. A video met without PyAV
    raises, naming the extra to install."""
    if item.file is None:
        return None
    if item.kind == "video":
        if videos:
            return f"a video, and this model reads none: {videos}"
        try:
            width, height = probe(item.file, item.name)
        except ImportError:
            raise
        except Exception as error:  # FFmpeg's errors, or no video stream
            return f"{type(error).__name__}: {error}"
        return too_small(refusal, width, height)
    from PIL import Image

    try:
        with Image.open(item.file) as image:
            width, height = image.size  # the header is read by open
            if image.getexif().get(0x0112) in (5, 6, 7, 8):  # turned a quarter: as load() will have it
                width, height = height, width
    except Exception as error:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError
        return f"{type(error).__name__}: {error}"
    return too_small(refusal, width, height)


def too_small(refusal: Callable[[int, int], "str | None"] | None, width: int, height: int) -> str | None:
    """Why an image of this size cannot run on the model, in a store's words, or ``None``."""
    why = refusal(width, height) if refusal is not None else None
    return f"{width} x {height} pixels, too small or too thin for this model: {why}" if why else None


def load(item: Item, frames: int | None = None) -> Any:
    """The image, decoded, RGB as a trace makes a PIL image (`as_rgb`: transparency over
    white, 16-bit grey scaled to 8 bits), so its rows are a trace's of the same file: files
    are oriented by their EXIF tag, as transformers' ``load_image`` does. A video item is
    its `Clip` (``frames`` of them evenly spaced, or every frame)."""
    from PIL import Image, ImageOps

    if item.kind == "video":
        return decode(item.file, item.name, frames)

    image = item.load()
    if not isinstance(image, Image.Image):
        image = _as_pil(image, item.name)
    image.load()
    if item.file is not None:
        image = ImageOps.exif_transpose(image)
    return as_rgb(image)


def _as_pil(image: Any, name: str) -> Any:
    """A numpy array (height x width x 3, uint8) or a torch tensor (3 x height x width) as a
    PIL image: the geometry measures an image by its PIL size."""
    import numpy
    import torch
    from PIL import Image

    if isinstance(image, torch.Tensor):
        from torchvision.transforms.functional import to_pil_image

        return to_pil_image(image)
    if isinstance(image, numpy.ndarray):
        return Image.fromarray(image)
    raise TypeError(f"image {name} is a {type(image).__name__}: collect takes image files, PIL images, numpy "
                    f"arrays (height x width x 3, uint8) and torch tensors (3 x height x width)")


def _folder(folder: Path) -> list[Item]:
    if not folder.exists():
        raise FileNotFoundError(f"no folder {folder}")
    if folder.is_file():
        return [_file(str(folder), folder)]
    extensions = image_extensions()
    files = sorted(path for path in folder.rglob("*") if path.is_file()
                   and (path.suffix.lower() in extensions or is_video(path))
                   and not any(part.startswith(".") for part in path.relative_to(folder).parts))
    return [_file(path.relative_to(folder).as_posix(), path) for path in files]


def _file(name: str, path: Path) -> Item:
    from PIL import Image

    if is_video(path):
        return Item(name, lambda: None, {"image": name}, path, "video")
    return Item(name, lambda: Image.open(path), {"image": name}, path)


def _item(name: str, image: Any) -> Item:
    if isinstance(image, (str, os.PathLike)):
        return _file(name, Path(image))
    return Item(name, lambda: image, {"image": name})


def _is_dataset(images: Any) -> bool:
    return hasattr(images, "column_names") and hasattr(images, "features")


def _dataset(dataset: Any, image_column: str, key_column: str | None) -> list[Item]:
    if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise TypeError("a streaming (iterable) dataset cannot be resumed row by row: pass a map-style "
                        "datasets.Dataset (load_dataset(..., streaming=False))")
    columns = list(dataset.column_names)
    for kind, column in (("image_column", image_column), ("key_column", key_column)):
        if column is not None and column not in columns:
            raise ValueError(f"{kind}={column!r} is not a column of the dataset; it has {', '.join(columns)}")
    rest = dataset.remove_columns([image_column])
    keys = [str(key) for key in rest[key_column]] if key_column else [str(i) for i in range(len(dataset))]
    records = [dict(row) for row in rest] if rest.column_names else [{} for _ in keys]
    return [Item(key, (lambda i=i: dataset[i][image_column]), {**record, "image": key})
            for i, (key, record) in enumerate(zip(keys, records))]
