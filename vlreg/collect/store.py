"""The activation store `collect` writes: safetensors shards beside a manifest.

A store is a folder::

    manifest.json                      what the store was made with (values, at, prompt, model, dtype)
    shards/0000000000-1a2b3c4d.safetensors   one group of images, written once

Each shard holds, for its images in order, one ``[rows, width]`` tensor per value (named
as the value is, ``"layers[0].layer_output"``) and the index: ``__image__`` (the row's image,
numbered within the shard), ``__token__``, ``__box__`` (``[rows, 4]``, float32, NaN where a
row covers no pixels) and ``__frame__`` (``[rows, 2]``, int64: a video's row's first and last
frame, -1 where a row covers no frame; absent from stores made before videos). Its header's metadata names the images and their prompts' ids (and
the prompts). A shard is written to a hidden temporary name, flushed to disk and renamed,
so a shard that exists is whole: a run killed mid-way leaves at most a temporary file,
which nothing reads (a later run of `collect` removes it).

Shards are read back memory-mapped: `open_store` reads the manifest and each shard's
header (a few kilobytes each) and nothing else; `Store.__getitem__` gives a `Column`,
whose rows are read from the mapped files only when indexed. Shard names begin with the
position of their first image in the input, so the shards sorted by name hold the rows
in input order, whichever process wrote them.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
from attrs import frozen

FORMAT = "vlreg-store-1"
MANIFEST = "manifest.json"
SHARDS = "shards"
INDEX = ("__image__", "__token__", "__box__", "__frame__")

#: safetensors' dtype names (its header format).
DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def write_atomic(path: Path, write: Any) -> None:
    """``write(temporary_path)``, then flush it to disk and rename it to ``path``: readers
    see the whole file or none. The temporary name is hidden (a leading dot)."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(scratch)
        with open(scratch, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_shard(folder: Path, name: str, tensors: dict[str, torch.Tensor], metadata: dict[str, Any]) -> Path:
    """One shard, atomically: ``tensors`` and ``metadata`` (JSON-encoded per key)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.safetensors"
    meta = {"format": FORMAT, **{key: json.dumps(value) for key, value in metadata.items()}}
    write_atomic(path, lambda scratch: save_file({k: v.contiguous() for k, v in tensors.items()}, str(scratch), meta))
    return path


def write_manifest(folder: Path, manifest: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(manifest, indent=2, sort_keys=True)
    write_atomic(folder / MANIFEST, lambda scratch: scratch.write_text(text))


def read_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def remove_leftovers(folder: Path) -> list[Path]:
    """The temporary files of shards a killed run was writing, removed."""
    found = sorted((Path(folder) / SHARDS).glob(".*.tmp"))
    for path in found:
        path.unlink(missing_ok=True)
    return found


@frozen(eq=False)
class Shard:
    """One shard's header: its tensors' dtypes, shapes and byte ranges, and its images."""

    path: Path
    start: int  # where the data begins in the file
    tensors: dict
    images: tuple[str, ...]
    prompts: tuple[str, ...]  # each image's prompt id
    prompt_texts: dict
    rows: int

    @classmethod
    def read(cls, path: Path) -> "Shard":
        with open(path, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        meta = {key: json.loads(value) for key, value in header.pop("__metadata__", {}).items() if key != "format"}
        return cls(path, 8 + size, header, tuple(meta["images"]), tuple(meta["prompts"]), meta["prompt_texts"],
                   header["__token__"]["shape"][0])

    def tensor(self, name: str) -> torch.Tensor:
        """Tensor ``name``, memory-mapped: a private (copy-on-write) mapping of the file, so
        the file is never written, and one that keeps no file descriptor open, so a store
        of thousands of shards can be read whole."""
        entry = self.tensors[name]
        dtype, shape = DTYPES[entry["dtype"]], entry["shape"]
        begin, end = (self.start + offset for offset in entry["data_offsets"])
        if end == begin:
            return torch.empty(shape, dtype=dtype)
        mapped = torch.from_file(str(self.path), shared=False, size=os.path.getsize(self.path), dtype=torch.uint8)
        raw = mapped[begin:end]
        if begin % dtype.itemsize:  # safetensors aligns its tensors; a file that does not is copied
            raw = raw.clone()
        return raw.view(dtype).reshape(shape)


def shard_paths(folder: Path) -> list[Path]:
    return sorted((Path(folder) / SHARDS).glob("[!.]*.safetensors"))


def shards(folder: Path) -> list[Shard]:
    return [Shard.read(path) for path in shard_paths(folder)]


class Column:
    """A value's rows across every shard, ``[rows, width]``, read only where indexed.

    Index it as a tensor: an int, a slice, or a list or tensor of row numbers; each returns
    a `torch.Tensor`. A slice within one shard is a view of the mapped file (no copy).
    ``len`` and indexing make it a map-style dataset for ``torch.utils.data``."""

    def __init__(self, name: str, pieces: Sequence[Shard]) -> None:
        self.name = name
        self._shards = [shard for shard in pieces if shard.rows]
        self._mapped: dict[int, torch.Tensor] = {}
        ends = torch.tensor([shard.rows for shard in self._shards], dtype=torch.long).cumsum(0)
        self._ends = ends
        self._starts = ends - torch.tensor([shard.rows for shard in self._shards], dtype=torch.long)
        first = pieces[0].tensors[name] if pieces else {"dtype": "F32", "shape": [0, 0]}
        self.dtype = DTYPES[first["dtype"]]
        self.shape = (int(ends[-1]) if len(ends) else 0, *first["shape"][1:])

    def __repr__(self) -> str:
        return f"Column({self.name!r}, shape={self.shape}, dtype={self.dtype}, {len(self._shards)} shards)"

    def __len__(self) -> int:
        return self.shape[0]

    def _piece(self, number: int) -> torch.Tensor:
        if number not in self._mapped:
            self._mapped[number] = self._shards[number].tensor(self.name)
        return self._mapped[number]

    def __getitem__(self, index: Any) -> torch.Tensor:
        if isinstance(index, int):
            rows = range(len(self))[index]
            number = int(torch.searchsorted(self._ends, rows, right=True))
            return self._piece(number)[rows - int(self._starts[number])]
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._span(start, stop)
            index = torch.arange(start, stop, step)
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        index = torch.where(index < 0, index + len(self), index)
        if len(index) and not (0 <= int(index.min()) and int(index.max()) < len(self)):
            raise IndexError(f"row index out of range for {len(self)} rows")
        numbers = torch.searchsorted(self._ends, index, right=True)
        found = torch.empty((len(index), *self.shape[1:]), dtype=self.dtype)
        for number in numbers.unique().tolist():
            chosen = (numbers == number).nonzero()[:, 0]
            found[chosen] = self._piece(number)[index[chosen] - self._starts[number]]
        return found

    def _span(self, start: int, stop: int) -> torch.Tensor:
        if stop <= start:
            return torch.empty((0, *self.shape[1:]), dtype=self.dtype)
        first = int(torch.searchsorted(self._ends, start, right=True))
        last = int(torch.searchsorted(self._ends, stop - 1, right=True))
        parts = [self._piece(n)[max(start - int(self._starts[n]), 0) : min(stop, int(self._ends[n])) - int(self._starts[n])]
                 for n in range(first, last + 1)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def chunks(self, size: int) -> Iterator[torch.Tensor]:
        """The rows in order, ``size`` at a time (the last chunk may be shorter)."""
        for start in range(0, len(self), size):
            yield self[start : start + size]


@frozen
class Record:
    """One row of the index: the image it is from (its file name, or the dataset's key),
    its token (among the image's tokens in sequence order; for ``at="text"``/``"all"``/
    ``"last"``, its position in the prompt; for a tower value, its row in the tower's
    sequence for that image), the pixels it covers ``(x0, y0, x1, y1)`` (NaN where it
    covers none), the id of the prompt (a key of `Store.prompts`), and, from a video, the
    first and last frame the row covers, as the file numbers them (``(-1, -1)``: none)."""

    image: str
    token: int
    box: tuple[float, float, float, float]
    prompt: str
    frame: tuple[int, int] = (-1, -1)


class Index:
    """One record per row, aligned with every value's rows.

    ``token`` (``[rows]``), ``box`` (``[rows, 4]``), ``frame`` (``[rows, 2]``: a video's
    row's first and last frame, -1 elsewhere) and ``image_id`` (``[rows]``: the row's image
    or video as a number into `Store.images`) are tensors; ``image`` and ``prompt`` give
    each row's image name and prompt id; ``index[i]`` is a `Record`."""

    def __init__(self, store: "Store") -> None:
        self._store = store
        self.token = Column("__token__", store._shards)[:].long()
        self.box = Column("__box__", store._shards)[:]
        self.frame = torch.cat([shard.tensor("__frame__") if "__frame__" in shard.tensors
                                else torch.full((shard.rows, 2), -1, dtype=torch.int64) for shard in store._shards]
                               ) if store._shards else torch.empty(0, 2, dtype=torch.int64)
        offsets, parts = 0, []
        for shard in store._shards:
            parts.append(shard.tensor("__image__").long() + offsets)
            offsets += len(shard.images)
        self.image_id = torch.cat(parts) if parts else torch.empty(0, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.token)

    @property
    def image(self) -> list[str]:
        names = self._store.images
        return [names[i] for i in self.image_id.tolist()]

    @property
    def prompt(self) -> list[str]:
        ids = self._store.image_prompts
        return [ids[i] for i in self.image_id.tolist()]

    def rows(self, image: str) -> slice:
        """The rows of image ``image`` (an image's rows are consecutive)."""
        number = self._store.images.index(image)
        where = (self.image_id == number).nonzero()[:, 0]
        return slice(int(where[0]), int(where[-1]) + 1) if len(where) else slice(0, 0)

    def table(self) -> Any:
        """The index as a pandas DataFrame, a row per store row (`supervised.table`)."""
        from .supervised import table

        return table(self)

    def dataset(self) -> Any:
        """The index as a ``datasets.Dataset`` (`supervised.dataset`)."""
        from .supervised import dataset

        return dataset(self)

    def __getitem__(self, row: int) -> Record:
        number = int(self.image_id[row])
        box = tuple(float(x) for x in self.box[row])
        return Record(self._store.images[number], int(self.token[row]), box, self._store.image_prompts[number],
                      tuple(int(x) for x in self.frame[row]))


class Store:
    """A store `collect` wrote, opened for reading (`open_store`)."""

    def __init__(self, path: "str | os.PathLike") -> None:
        self.path = Path(path)
        manifest = read_manifest(self.path)
        if manifest is None:
            raise FileNotFoundError(f"{self.path} holds no {MANIFEST}: it is not a store vlreg collect wrote")
        self.manifest = manifest
        self._shards = shards(self.path)
        self._index: Index | None = None

    @property
    def values(self) -> list[str]:
        return list(self.manifest["values"])

    @property
    def images(self) -> list[str]:
        """Every image in the store, in the order its rows are."""
        return [name for shard in self._shards for name in shard.images]

    @property
    def image_prompts(self) -> list[str]:
        """Each image's prompt id, in `images` order."""
        return [pid for shard in self._shards for pid in shard.prompts]

    @property
    def prompts(self) -> dict[str, str]:
        """Prompt id -> the prompt as the model was given it."""
        found: dict[str, str] = {}
        for shard in self._shards:
            found.update(shard.prompt_texts)
        return found

    @property
    def index(self) -> Index:
        if self._index is None:
            self._index = Index(self)
        return self._index

    def __len__(self) -> int:
        return sum(shard.rows for shard in self._shards)

    def __getitem__(self, name: str) -> Column:
        if name not in self.manifest["values"]:
            raise KeyError(f"{name!r} is not in this store; it holds {', '.join(self.values)}")
        return Column(name, self._shards)

    def __repr__(self) -> str:
        return (f"Store({str(self.path)!r}: {len(self)} rows of {', '.join(self.values)} at {self.manifest['at']!r}, "
                f"{len(self.images)} images, {len(self._shards)} shards, {self.manifest['dtype']})")

    def batches(self, name: str, size: int, *, shuffle: bool = False, seed: int = 0) -> Iterator[torch.Tensor]:
        """``name``'s rows ``size`` at a time: in order, or in a seeded random order."""
        column = self[name]
        if not shuffle:
            yield from column.chunks(size)
            return
        order = torch.randperm(len(column), generator=torch.Generator().manual_seed(seed))
        for start in range(0, len(order), size):
            yield column[order[start : start + size]]

    def examples(self, name: str, size: int, *, shuffle: bool = False, seed: int = 0, labels: Any = None) -> Iterator:
        """`batches` whose rows carry their index entries and labels (`supervised.examples`)."""
        from .supervised import examples

        return examples(self, name, size, shuffle=shuffle, seed=seed, labels=labels)

    def labels(self, labels: Any, missing: Any = "refuse") -> Any:
        """Per-image ``labels`` as one per row (`supervised.per_row`)."""
        from .supervised import per_row

        return per_row(self, labels, missing)


def open_store(path: "str | os.PathLike") -> Store:
    """The store at ``path``, opened for reading: the manifest and the shards' headers are
    read, the rows only when indexed (memory-mapped)."""
    return Store(path)
