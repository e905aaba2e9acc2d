"""The features' argument of the call that writes them in: read off the call's arguments,
one tensor per image served joined, and a new value written back in the same shape.

A `Scatter` names the features by position or keyword; some hosts are handed one tensor per
image (Ovis 2.5's ``_merge_visual_features``), served as one tensor whose writes are cut back
into the pieces."""

from __future__ import annotations

from typing import Any

import torch


def _argument(raw: Any, argument: int | str) -> Any:
    """The ``argument`` (a position, or a keyword's name) of a call's ``(args, kwargs)``."""
    args, kwargs = raw
    if isinstance(argument, str):
        return kwargs.get(argument)
    return args[argument] if len(args) > argument else None


def _shares_storage(served: Any, native: Any) -> bool:
    """Whether ``served`` is a view of ``native`` (the same storage), not a copy of it (of
    per-image features, of those vlreg wrote joined)."""
    if isinstance(native, (tuple, list)):
        if not isinstance(native, _Pieces):
            return False
        native = native.whole
    if not isinstance(served, torch.Tensor) or not isinstance(native, torch.Tensor):
        return True
    return served.untyped_storage().data_ptr() == native.untyped_storage().data_ptr()


class _Pieces(tuple):
    """Per-image features vlreg wrote: views (``narrow``, which torch lets an edit of
    ``whole`` reach) of ``whole``, their rows joined."""

    whole: torch.Tensor


def _joined(pieces: Any) -> torch.Tensor:
    """Per-image features ``[rows, width]`` joined: ``whole`` where vlreg wrote them, else a
    copy (transformers' are a ``split``'s outputs, which torch forbids editing in place)."""
    if isinstance(pieces, _Pieces):
        return pieces.whole
    return torch.cat([each.reshape(-1, each.shape[-1]) for each in pieces])


def _pieces(new: torch.Tensor, like: Any) -> _Pieces:
    """``new`` (rows joined) cut as ``like`` (per-image features) is."""
    found, start = [], 0
    for each in like:
        found.append(new.narrow(0, start, len(each)))
        start += len(each)
    pieces = _Pieces(found)
    pieces.whole = new
    return pieces


def _with_argument(raw: Any, argument: int | str, new: torch.Tensor) -> Any:
    """``raw`` with its ``argument`` replaced by ``new``, reshaped to the native layout."""
    args, kwargs = raw
    if isinstance(argument, str):
        return args, {**kwargs, argument: new.reshape(kwargs[argument].shape)}
    native = args[argument]
    if isinstance(native, torch.Tensor):
        new = new.reshape(native.shape)
    return (*args[:argument], new, *args[argument + 1 :]), kwargs
