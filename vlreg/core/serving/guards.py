"""The tensor a read-only value is served as: `ReadOnlyTensor`, which refuses in-place
edits inside a trace (`vlreg.ReadOnly`, with the value's reason) and is a plain tensor
everywhere else."""

from __future__ import annotations

from typing import Any

import torch
from greenlet import getcurrent

from ..errors import ReadOnly


def _tracing() -> bool:
    """Whether this code runs as a trace's intervention (in an nnsight worker)."""
    return getattr(getcurrent(), "mediator", None) is not None


#: Tensor methods whose name ends in "_" that change no values.
_NOT_EDITS = frozenset({"requires_grad_", "retain_grad", "share_memory_", "pin_memory", "detach_"})
_AUGMENTED = frozenset(
    f"__i{op}__"
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift", "matmul")
)


def _edits(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``func(*args, **kwargs)`` writes into ``args[0]`` (or into ``out=``)."""
    if isinstance(kwargs.get("out"), ReadOnlyTensor):
        return True
    if not args or not isinstance(args[0], ReadOnlyTensor):
        return False
    name = getattr(func, "__name__", "")
    if name == "__setitem__" or name in _AUGMENTED:
        return True
    return name.endswith("_") and not name.startswith("_") and name not in _NOT_EDITS


class ReadOnlyTensor(torch.Tensor):
    """A served value whose writes would not reach the model.

    It shares the storage of what the model holds (no copy). Inside a trace an in-place
    edit of it raises `ReadOnly` with the value's reason; everything else, and anything
    after the trace, behaves as the plain tensor (results are plain tensors).
    """

    _vlreg_reason = "this value cannot be written"

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if _edits(func, args, kwargs) and _tracing():
            target = kwargs.get("out") if isinstance(kwargs.get("out"), ReadOnlyTensor) else args[0]
            raise ReadOnly(target._vlreg_reason)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return repr(self.as_subclass(torch.Tensor))


def read_only_view(tensor: torch.Tensor, reason: str) -> ReadOnlyTensor:
    """``tensor`` as a `ReadOnlyTensor` (same storage) that refuses edits with ``reason``."""
    view = tensor.as_subclass(ReadOnlyTensor)
    view._vlreg_reason = reason
    return view
