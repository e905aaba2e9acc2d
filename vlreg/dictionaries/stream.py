"""A store's rows as an endless, seeded, shuffled stream of training batches.

A trainer needs rows in random order, without the whole store in memory. The rows are
cut into blocks of consecutive rows (``block`` rows each, as much as the memory budget
holds; consecutive rows are a shard's images in order), each epoch visits the blocks in
a seeded random order, and each block is read whole from the mapped shards and shuffled
inside. A store that fits one block is shuffled exactly; a larger one mixes images within
a block, and the blocks' order changes each epoch.

The stream is a pure function of the seed and the store, so a run resumed at sample ``n``
(`batches(..., start=n)`) yields what an uninterrupted run yields from there: the blocks
before ``n`` are skipped by their sizes, unread.
"""

from __future__ import annotations

import hashlib
from typing import Iterator, Sequence

import torch


def block_rows(width: int, budget_mib: float, rows: int) -> int:
    """Rows a block holds: ``budget_mib`` of float32 rows ``width`` wide (at least one)."""
    return max(1, min(rows, int(budget_mib * 2**20 // (4 * width))))


def _order(count: int, seed: int, *salt: int) -> torch.Tensor:
    """A permutation of ``count`` seeded by ``seed`` and ``salt`` (the same on every machine)."""
    digest = hashlib.sha256(repr((seed, *salt)).encode()).digest()
    return torch.randperm(count, generator=torch.Generator().manual_seed(int.from_bytes(digest[:7], "little")))


def _pieces(rows: int, block: int, seed: int, skip: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(epoch, block number, start row, stop row, offset)`` for every block of the endless
    stream from sample ``skip`` on; ``offset`` is how many of the block's shuffled rows are
    skipped (nonzero for the first block only)."""
    count = -(-rows // block)
    epoch, passed = 0, 0
    while True:
        for number in _order(count, seed, epoch).tolist():
            start, stop = number * block, min(rows, (number + 1) * block)
            size = stop - start
            if passed + size > skip:
                yield epoch, number, start, stop, max(0, skip - passed)
            passed += size
        epoch += 1


def _read(columns: Sequence, rows: torch.Tensor, chunk_mib: float = 4) -> torch.Tensor:
    """The columns' ``rows`` side by side, float32, gathered from the mapped shards
    ``chunk_mib`` at a time into one tensor (so the block is held once, not once more in passing)."""
    width = sum(column.shape[1] for column in columns)
    part, chunk = torch.empty(len(rows), width), block_rows(width, chunk_mib, len(rows))
    for at in range(0, len(rows), chunk):
        chosen, left = rows[at : at + chunk], 0
        for column in columns:
            part[at : at + len(chosen), left : left + column.shape[1]] = column[chosen]
            left += column.shape[1]
    return part


def batches(columns: Sequence, size: int, *, seed: int = 0, block: int, start: int = 0) -> Iterator[torch.Tensor]:
    """Batches of ``size`` rows, float32, forever: each row the columns' rows side by side
    (``[size, sum of widths]``; one column for a dictionary, an input and an output for a
    transcoder), from sample ``start`` of the stream on.

    Memory: one block is held (read in small chunks, `_read`), and let go before the next
    is read; a batch is its own tensor (a copy), so one the trainer still holds keeps no
    block alive (benchmarks/training.py measures the peak)."""
    rows = len(columns[0])
    if rows == 0:
        raise ValueError("the store holds no rows to train on")
    rest = None  # the rows of the last block that did not fill a batch
    for epoch, number, first, stop, offset in _pieces(rows, block, seed, start):
        part = _read(columns, first + _order(stop - first, seed, epoch, number, 1)[offset:])
        if rest is not None:
            if len(rest) + len(part) < size:
                rest, part = torch.cat([rest, part]), None
                continue
            need = size - len(rest)
            yield torch.cat([rest, part[:need]])
            part = part[need:]
        full = len(part) - len(part) % size
        for at in range(0, full, size):
            yield part[at : at + size].clone()
        rest = part[full:].clone() if full < len(part) else None
        part = None
