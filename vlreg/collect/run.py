"""`collect`: values at every image of a dataset into a store, resumable and data-parallel.

The images are cut into groups of ``shard_images`` by their position in the input; a
group is one shard, written whole or not at all. A run skips the images the store
already holds (its shards name them), so a rerun after a crash does only what is
missing and never writes a row twice; a group that a killed run had finished is not
redone. Under ``torchrun`` (or ``accelerate launch``), ``RANK`` and ``WORLD_SIZE`` give each
process the groups whose number is its rank modulo the world size: the processes share
no state but the folder, and the shards they write are the ones one process would.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch
from attrs import field, frozen

from .manifest import manifest as make_manifest
from .manifest import open_held
from .prompts import Prompts, prompt_id, text_of
from .prompts import source as prompt_source
from .rows import Batches, Rows
from .sites import resolve
from .sources import items as image_items
from .sources import load, too_small, unreadable
from .store import SHARDS, remove_leftovers, shards, write_shard
from .videos import check_frames, no_videos

ON_ERROR = ("stop", "skip")


@frozen
class Summary:
    """What a run did (this process, under torchrun): images and rows it added, images
    it skipped (name, why), the images of its share the store held before, its seconds,
    and the store's totals after."""

    out: Path
    images: int
    rows: int
    skipped: tuple = ()
    already: int = 0
    seconds: float = 0.0
    store_images: int = 0
    store_rows: int = 0
    rank: int = 0
    world_size: int = 1
    notes: tuple = field(default=())

    def __str__(self) -> str:
        who = f"rank {self.rank} of {self.world_size}: " if self.world_size > 1 else ""
        rate = f" ({self.images / self.seconds:.2f} images/s)" if self.seconds and self.images else ""
        lines = [f"{who}collected {self.images} images, {self.rows} rows, in {self.seconds:.1f} s{rate}; "
                 f"{self.already} were already in the store"]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} unreadable: "
                         + "; ".join(f"{name} ({why})" for name, why in self.skipped))
        lines += list(self.notes)
        if self.rank == 0:  # after every process is done (under torchrun)
            lines.append(f"{self.out} now holds {self.store_images} images, {self.store_rows} rows")
        return "\n".join(lines)


def collect(
    model: Any,
    values: Sequence[str],
    images: Any,
    out: "str | os.PathLike",
    *,
    prompt: Any = None,
    at: str = "image",
    batch: int = 8,
    dtype: Any = None,
    on_error: str = "stop",
    shard_images: int | None = None,
    image_column: str = "image",
    prompt_column: str | None = None,
    key_column: str | None = None,
    progress: bool = True,
    remote: bool = False,
    frames: int | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> Summary:
    """Read ``values`` at every image of ``images`` and write them to the store ``out``.

    Args:
        model: A `StandardizedTransformer` loaded with ``task="image-text-to-text"``.
        values: Standard value names, as in a trace (``"layers[0].layer_output"``).
        images: A folder (its image and video files, recursively, sorted), a list of files
            or PIL images, a mapping of names to either, or a Hugging Face ``datasets.Dataset``.
            A video file (``.mp4``, ``.webm``, ...) is decoded with PyAV (``vlreg[video]``)
            and run alone, its rows at its video tokens.
        out: The store's folder (made if absent; a rerun adds the images it lacks).
        prompt: The text each image is asked with (the chat template places the image
            before it), a full prompt holding the processor's image token, or a function
            of the image's record (a dataset row, or ``{"image": name}``) giving either.
        at: ``"image"`` (the image's tokens), ``"text"`` (every other token of the prompt),
            ``"all"``, or ``"last"`` (the prompt's last token).
        batch: Images per forward.
        dtype: The store's dtype (``"bfloat16"``, ``"float16"`` halve the disk); ``None``:
            as the model computes.
        on_error: An image that cannot be read: ``"stop"`` (raise, naming it) or ``"skip"``
            (leave it out, name it in the summary; a rerun tries it again).
        shard_images: Images per shard (default: about 256 MiB of rows).
        image_column, prompt_column, key_column: A dataset's columns of the image, the
            prompt's text and the image's name (default: its row number).
        progress: Show a progress bar and print the summary (stderr).
        remote: Send each batch's trace to NDIF (``True``), a server of your own (its
            address) or nnsight's local rehearsal (``"local"``); the rows come back and
            are written here. Load the model with ``dispatch=False`` to keep the weights
            on the server.
        frames: The frames read from each video: ``None``, every frame; ``n``, ``n`` of
            them evenly spaced from the first to the last. The index's ``frame`` column
            numbers them as the file does.
        rank, world_size: This process's share (default: ``RANK``, ``WORLD_SIZE``).

    Returns the run's `Summary`. Everything the input already tells is checked before
    the model runs: value names, ``at``, the prompts, the images' files, the store's
    manifest.
    """
    _check(model, on_error, batch)
    check_frames(frames)
    rank, world_size = _share(rank, world_size)
    started = time.perf_counter()
    sites = resolve(model, values, at)
    store_dtype = _dtype(dtype)
    items = image_items(images, image_column=image_column, key_column=key_column)
    videos = no_videos(model) if any(item.kind == "video" for item in items) else None
    if any(item.kind == "video" for item in items) and not videos and any(site.kind == "tower" for site in sites):
        raise ValueError("tower values are not collected over videos: their rows are the frames' patches, which no "
                         "index here places; collect vision.video_features or a text value, or leave the videos out")
    chosen = Prompts(model, at)
    full = {item.name: chosen.full(text_of(item, prompt, prompt_column), item.kind) for item in items
            if item.kind == "image" or not videos}
    refusal = getattr(model.__dict__.get("vision"), "image_refusal", None)
    skipped = _unreadable(items, on_error, refusal, videos)
    readable = [item for item in items if item.name not in dict(skipped)]
    folder = Path(out)
    manifest = make_manifest(model, sites, at, prompt_source(prompt, prompt_column), store_dtype, shard_images,
                             readable, full, batch, remote, frames)
    held = open_held(folder, manifest, full)
    mine, already = _share_of(items, readable, held, manifest["shard_images"], rank, world_size)
    batches = Batches(model, sites, at, store_dtype, remote)
    added_images = added_rows = 0
    bar = _bar(sum(len(group) for group in mine), progress and rank == 0, rank, world_size)
    try:
        for group in mine:
            done, failed = _group(batches, group, full, batch, on_error, bar, refusal, frames)
            skipped += failed
            if done:
                _write(folder, done, full)
                added_images += len(done)
                added_rows += sum(len(rows.token) for _, _, rows in done)
    finally:
        bar.close()
    if _barrier(world_size) and rank == 0:
        remove_leftovers(folder)  # every process is done: a temporary file left is a killed run's
    after = shards(folder)
    summary = Summary(folder, added_images, added_rows, tuple(skipped), already, time.perf_counter() - started,
                      sum(len(s.images) for s in after), sum(s.rows for s in after), rank, world_size,
                      _notes(batches))
    if progress:
        print(summary, file=sys.stderr)
    return summary


def _notes(batches: Batches) -> tuple[str, ...]:
    """What the summary says about how the batches ran, where it is not as asked."""
    notes = []
    if batches.alone:
        notes.append("tower values ran one image a forward: the tower's batch is not one entry per image here")
    if batches.videos:
        notes.append(f"{batches.videos} videos ran one a forward, each alone")
    if batches.grouped:
        notes.append("batches ran in groups of images of one pixel shape: this processor pads a batch's pixels to "
                     "its largest image, which the tower would see")
    return tuple(notes)


def _check(model: Any, on_error: str, batch: Any) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r}: pass 'stop' (raise at an unreadable image) or 'skip'")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch={batch!r}: images per forward, a positive integer")
    if getattr(model, "processor", None) is None:
        raise ValueError("collect runs images through the model: load it with task='image-text-to-text'")


def _unreadable(items: list, on_error: str, refusal: Any = None, videos: str | None = None) -> list:
    """The image and video files whose headers do not read, or whose size the model refuses
    (`Vision.image_refusal`), and the videos where the model reads none (``videos``, why),
    as ``(name, why)``: refused under ``on_error="stop"``, before any work."""
    skipped = []
    for item in items:
        why = unreadable(item, refusal, videos)
        if why is not None:
            if on_error == "stop":
                readable = "too small or too thin" in why or "reads none" in why
                what = f"is {why}:" if readable else f"cannot be read ({why}): fix or"
                raise ValueError(f"{item.kind} {item.name} {what} remove it, or pass on_error='skip' (--on-error skip) to "
                                 f"leave it out")
            skipped.append((item.name, why))
    return skipped


def _share_of(items: list, readable: list, held: dict, shard: int, rank: int, world_size: int) -> tuple[list, int]:
    """This process's groups of images the store lacks (a group: the images whose input
    position divided by ``shard`` is the group's number; a process: the groups whose
    number is its rank modulo the world size), and how many of its share the store holds."""
    position = {item.name: index for index, item in enumerate(items)}
    groups: dict[int, list] = {}
    for item in readable:
        if item.name not in held:
            groups.setdefault(position[item.name] // shard, []).append((position[item.name], item))
    mine = [groups[number] for number in sorted(groups) if number % world_size == rank]
    already = sum(1 for name in held if name in position and position[name] // shard % world_size == rank)
    return mine, already


def _group(batches: Batches, group: list, full: dict, size: int, on_error: str, bar: Any,
           refusal: Any = None, frames: int | None = None) -> tuple[list, list]:
    """Every image of ``group`` through the model, ``size`` at a time, and every video
    alone: ``(position, item, Rows)`` in order, and the files that failed to load or that
    the model refuses (under ``on_error="skip"``)."""
    done: list[tuple[int, Any, Rows]] = []
    failed: list = []
    for start in range(0, len(group), size):
        chunk, pictures = [], []
        for position, item in group[start : start + size]:
            try:
                picture = load(item, frames)
            except Exception as error:  # PIL's and FFmpeg's decode errors are of several kinds
                if on_error == "stop":
                    raise ValueError(f"{item.kind} {item.name} cannot be read ({type(error).__name__}: {error}): fix or "
                                     f"remove it and run again (the shards written so far are kept), or pass "
                                     f"on_error='skip'") from error
                failed.append((item.name, f"{type(error).__name__}: {error}"))
                continue
            why = too_small(refusal, *picture.size)
            if why and on_error == "stop":
                raise ValueError(f"{item.kind} {item.name} is {why}; remove it, or pass on_error='skip' to leave it out "
                                 f"(the shards written so far are kept)")
            if why:
                failed.append((item.name, why))
                continue
            if item.kind == "video":
                done.append((position, item, batches.video(picture, full[item.name])))
                continue
            pictures.append(picture)
            chunk.append((position, item))
        if chunk:
            found = batches.run(pictures, [full[item.name] for _, item in chunk])
            done += [(position, item, rows) for (position, item), rows in zip(chunk, found)]
        bar.update(len(group[start : start + size]))
    return sorted(done, key=lambda found: found[0]), failed


def _write(folder: Path, done: list, full: dict) -> None:
    names = [item.name for _, item, _ in done]
    first = done[0][0]
    digest = hashlib.sha256(json.dumps(names).encode()).hexdigest()[:8]
    tensors: dict[str, torch.Tensor] = {}
    for name in done[0][2].values:
        tensors[name] = torch.cat([rows.values[name] for _, _, rows in done])
    tensors["__image__"] = torch.cat([torch.full((len(rows.token),), i, dtype=torch.int32)
                                      for i, (_, _, rows) in enumerate(done)])
    tensors["__token__"] = torch.cat([rows.token for _, _, rows in done]).to(torch.int64)
    tensors["__box__"] = torch.cat([rows.box for _, _, rows in done]).to(torch.float32)
    tensors["__frame__"] = torch.cat([torch.full((len(rows.token), 2), -1) if rows.frame is None else rows.frame
                                      for _, _, rows in done]).to(torch.int64)
    ids = [prompt_id(full[name]) for name in names]
    texts = {pid: full[name] for pid, name in zip(ids, names)}
    write_shard(folder / SHARDS, f"{first:010d}-{digest}", tensors,
                      {"images": names, "prompts": ids, "prompt_texts": texts})


def _dtype(dtype: Any) -> torch.dtype | None:
    """The store's dtype: ``None`` (the model's), or a float in any common spelling."""
    from ..core.devices import dtype_of

    return dtype_of(dtype, auto=False)


def _share(rank: int | None, world_size: int | None) -> tuple[int, int]:
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not one of the {world_size} processes (RANK, WORLD_SIZE)")
    return rank, world_size


def _barrier(world_size: int) -> bool:
    """Wait for every process, so the summary counts the whole store (gloo: no GPU
    needed); whether every process is known to be done."""
    if world_size == 1:
        return True
    if "MASTER_ADDR" not in os.environ:
        return False
    import torch.distributed as dist

    made = not dist.is_initialized()
    if made:
        dist.init_process_group("gloo")
    try:
        dist.barrier()
    finally:
        if made:
            dist.destroy_process_group()
    return True


def _bar(total: int, shown: bool, rank: int, world_size: int) -> Any:
    from tqdm.auto import tqdm

    label = "collect" if world_size == 1 else f"collect (rank {rank} of {world_size})"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tqdm(total=total, unit="image", desc=label, disable=not shown, file=sys.stderr, dynamic_ncols=True)
