"""What a store is made with (its manifest), and the check that a rerun makes it the same way.

The manifest records the values, ``at``, the prompt's source, the store's dtype, the model
(`identity`), the frames read from each video (``frames``: every frame, or how many, evenly
spaced: another choice gives a video other rows) and the images per shard. A rerun with
any of these otherwise is refused, naming each difference; an image or video the store
holds under another prompt is refused too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .identity import identity
from .prompts import prompt_id
from .sites import Site
from .sources import load
from .store import FORMAT, MANIFEST, SHARDS, read_manifest, shard_paths, shards, write_manifest

#: A shard's size when ``shard_images`` is not given: about this many bytes of rows.
SHARD_BYTES = 256 * 2**20
#: What a rerun must give as the store was made (``frames`` is absent from stores made before videos: None).
COMPARED = ("format", "values", "at", "prompt", "dtype", "model", "frames")


def open_held(folder: Path, manifest: dict, full: dict) -> dict[str, str]:
    """The store's images (name -> prompt id) after checking it was made as this run
    would make it; a new store gets its manifest."""
    found = read_manifest(folder)
    if found is not None and not shard_paths(folder):
        found = None  # a store that holds nothing yet (its first run died before a shard landed) is new
    if found is None:
        ours = (MANIFEST, SHARDS)
        if folder.exists() and any(not p.name.startswith(".") and p.name not in ours for p in folder.iterdir()):
            raise ValueError(f"{folder} is a folder with files in it but no {MANIFEST}: collect into a new or "
                             f"empty folder, or into a store collect made")
        write_manifest(folder, manifest)
        return {}
    differences = [f"{key}: {_show(found.get(key))}, not {_show(manifest[key])}"
                   for key in COMPARED
                   if _compared(key, found.get(key)) != _compared(key, manifest[key])]
    if differences:
        raise ValueError(f"the store at {folder} was made with other settings ({'; '.join(differences)}): collect "
                         f"into another folder, or pass what it was made with to add images to it")
    manifest.update(shard_images=found["shard_images"])
    held = {}
    for shard in shards(folder):
        for name, pid in zip(shard.images, shard.prompts):
            if name in full and prompt_id(full[name]) != pid:
                raise ValueError(f"the store at {folder} holds {name} asked with the prompt "
                                 f"{shard.prompt_texts[pid]!r}, not {full[name]!r}: collect into another folder")
            held[name] = pid
    return held


def _compared(key: str, value: Any) -> Any:
    if key == "model" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "path"}  # a moved checkpoint is the same model
    return value


def _show(value: Any) -> str:
    return json.dumps(_compared("model", value) if isinstance(value, dict) else value)


def manifest(model: Any, sites: list[Site], at: str, prompt: str, dtype: Any, shard_images: int | None,
             items: list, full: dict, batch: int, remote: Any, frames: int | None = None) -> dict:
    from .. import __version__

    shard = shard_images or shard_size(model, sites, at, items, full, batch, dtype)
    return {
        "format": FORMAT,
        "vlreg": __version__,
        "values": [site.name for site in sites],
        "at": at,
        "prompt": prompt,
        "dtype": str(dtype or model.dtype).removeprefix("torch."),
        "model": identity(model, local=not remote),
        "frames": frames,
        "shard_images": int(shard),
    }


def shard_size(model: Any, sites: list[Site], at: str, items: list, full: dict, batch: int, dtype: Any) -> int:
    """Images per shard for about `SHARD_BYTES` of rows, from the first image's geometry
    and the values' widths (an estimate: a shard's size only bounds memory and what a
    killed run loses), a multiple of ``batch``; the same in every process. A video is
    taken as 4096 tokens (it is not decoded for this)."""
    try:
        first = items[0]
        if first.kind == "video":
            raise ValueError("a video")
        tokens = model.vision.geometry(full[first.name], [load(first)])[0].tokens
    except Exception:  # no image to measure by (an unreadable one is handled when its batch runs)
        tokens = 4096 if items and items[0].kind == "video" else 1024
    rows = {"image": tokens, "text": 4 * tokens, "all": 5 * tokens, "last": 1}[at]
    width = 0
    for site in sites:
        if site.name == "logits":
            width += model.vocab_size
        elif site.kind == "tower":
            width += model.vision.vision_hidden_size
            rows = max(rows, 4 * tokens)
        else:
            width += model.hidden_size
    itemsize = (dtype or model.dtype).itemsize
    images = max(1, SHARD_BYTES // max(1, rows * width * itemsize))
    return max(batch, images // batch * batch)


