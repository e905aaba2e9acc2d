"""`Blocks`: the envoy of a standard model's lists of blocks."""

from __future__ import annotations

from typing import Any

from nnsight.intervention.envoy import Envoy


class Blocks(Envoy):
    """The envoy of every ``ModuleList`` under a standard model (``layers``,
    ``vision.layers``): an index out of range says how many blocks there are."""

    #: How messages name it (``layers``, ``vision.layers``); set at build, else its path.
    _label = ""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int) and not -len(self) <= key < len(self):
            where = f"model.{self._label}" if self._label else self.path
            count = len(self)
            last = f"{where}[0] to {where}[{count - 1}], or {where}[-1] for the last" if count else "none"
            raise IndexError(f"{where}[{key}] is out of range: there are {count} blocks ({last})")
        return super().__getitem__(key)
