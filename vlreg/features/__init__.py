"""A feature browser: a static site of a dictionary's features (or any directions) over a store.

`build(store, out, images, dictionary=...)` (``vlreg features STORE DICTIONARY --images
IMAGES --out SITE``) reads the store's rows once through the dictionary, keeping per
feature only its statistics, its strongest rows and a histogram (`scan`), and writes a
site (`site`) that opens in a browser with no network: an index of features (firing
rate, mean and largest activation, a search box), and per feature its strongest image
tokens across the store as crops of their images with the token's box drawn, its
activation over its strongest image, its histogram, and the tokens its decoder direction
promotes through the model's unembedding. ``directions=`` (named vectors: a probe's
weights, a steering vector) gives the same pages for them. The boxes are the store's
index (`vlreg.collect`: each token's pixels, from `model.vision.geometry`); the colours
are `vlreg.pictures`'.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from ..core.envoys.readout import unembedding
from .scan import Found, Reader, promoted, scan

__all__ = ["build", "Reader", "Found", "scan", "promoted"]


def build(store: Any, out: "str | os.PathLike", images: Any, *, dictionary: Any = None,
          directions: "dict[str, torch.Tensor] | None" = None, value: str | None = None, model: Any = None,
          top: int = 16, per_image: int = 1, bins: int = 24, chunk: int = 4096, title: str | None = None,
          image_column: str = "image", key_column: str | None = None, progress: bool = True) -> Path:
    """Write the site for ``dictionary`` (a `vlreg.dictionaries.Dictionary`, or its file or
    folder) or ``directions`` over ``value`` of ``store`` (a `Store` or its folder) into
    ``out``. ``images`` are the ones the store was collected from (a folder, a list, a
    mapping, a dataset: as `vlreg.collect.collect` takes them), for the crops. ``value``
    defaults to the dictionary's (an sae-lens folder names it) or the store's only one.
    ``model`` (a `StandardizedTransformer` or a checkpoint) gives the unembedding for the
    promoted tokens of a text-model value (none without it). Each feature's ``top`` rows
    are at most ``per_image`` of one image."""
    from ..collect.sources import items
    from ..collect.store import Store, open_store
    from ..dictionaries import Dictionary
    from . import site

    store = store if isinstance(store, Store) else open_store(store)
    if (dictionary is None) == (directions is None):
        raise ValueError("give a dictionary or directions (named vectors), one of the two")
    if dictionary is not None:
        named = _value_of(dictionary)
        dictionary = dictionary if isinstance(dictionary, Dictionary) else Dictionary.load(dictionary)
        reader = Reader.of_dictionary(dictionary.to("cpu", torch.float32))
    else:
        named, reader = None, Reader.of_directions(directions)
    value = value or named or (store.values[0] if len(store.values) == 1 else None)
    if value is None:
        raise ValueError(f"the store holds {', '.join(store.values)}: say which value the dictionary reads (value=)")
    column = store[value]
    if column.shape[1] != reader.directions.shape[1]:
        raise ValueError(f"{value} is {column.shape[1]} wide, the {'dictionary' if dictionary is not None else 'directions'} "
                         f"{reader.directions.shape[1]}")
    given = items(images, image_column=image_column, key_column=key_column)
    videos = [item.name for item in given if item.kind == "video" and item.name in store.images]
    if videos:
        raise ValueError(f"the store holds rows of {len(videos)} videos (first: {videos[0]!r}), and the feature site "
                         "shows crops of images only: collect the images into a store of their own to browse them")
    load = {item.name: item.load for item in given}
    missing = [name for name in store.images if name not in load]
    if missing:
        raise ValueError(f"{len(missing)} of the store's images are not among the images given (first: {missing[0]!r}): "
                         "pass the folder or dataset the store was collected from")
    _say(progress, f"reading {len(column)} rows of {value} through {len(reader.names)} features ...")
    found = scan(column, reader, store.index.image_id, top=top, bins=bins, chunk=chunk, per_image=per_image)
    needed = {int(store.index.image_id[r]) for r in found.top_rows[found.top_rows >= 0].tolist()}
    needed |= {int(store.index.image_id[rows.start]) for rows in found.image_rows if rows is not None}
    out = Path(out)
    shown = site.write_images(out, store, needed, load)
    promotes = _promotes(model, value, reader)
    title = title or f"{'Features' if dictionary is not None else 'Directions'} of {value}"
    site.write(out, store, value, reader, found, shown, promotes, title)
    _say(progress, f"wrote {out / 'index.html'}: {sum(1 for r in found.image_rows if r is not None)} feature pages, "
                   f"{len(shown)} images")
    return out


def _value_of(dictionary: Any) -> str | None:
    """The value an sae-lens folder says its SAE reads (``metadata.hook_name``), if it says."""
    if isinstance(dictionary, (str, os.PathLike)) and (Path(dictionary) / "cfg.json").is_file():
        return (json.loads((Path(dictionary) / "cfg.json").read_text()).get("metadata") or {}).get("hook_name")
    return None


def _promotes(model: Any, value: str, reader: Reader) -> "list | None":
    """The tokens each feature's direction promotes, where the value is in the text model's
    width (the stream, the features) and a model is given."""
    if model is None or (value.startswith("vision.") and value != "vision.image_features"):
        return None
    if isinstance(model, (str, os.PathLike)):
        from .. import StandardizedTransformer

        model = StandardizedTransformer(str(model), task="image-text-to-text", dispatch=True, device="cpu")
    weight = unembedding(model).detach()
    if weight.shape[1] != reader.directions.shape[1]:
        return None
    tokenizer = model.tokenizer
    return promoted(reader, weight.cpu(), lambda i: tokenizer.decode([i]))


def _say(progress: bool, line: str) -> None:
    if progress:
        print(line, file=sys.stderr, flush=True)
