"""vlreg: one traceable interface over vision-language model families.

    from vlreg import StandardizedTransformer
    model = StandardizedTransformer(checkpoint, task="image-text-to-text", dispatch=True)
    with model.trace(prompt, images=[image]):
        out = model.layers[1].layer_output.save()

Families are plugins (see `vlreg.plugin` and docs/writing-a-plugin.md).

The names below are imported when first used, not with the package: torch, transformers
and nnsight take seconds to import, and ``vlreg --help`` (or a plugin that only declares
itself) needs none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.errors import LocalOnly, NoFamily, OutOfOrder, ReadOnly, Unavailable
    from .core.host.hookspecs import hookimpl
    from .core.model import StandardizedTransformer

#: Each public name and the module it lives in.
_HOMES = {
    "StandardizedTransformer": ".core.model",
    "Unavailable": ".core.errors",
    "ReadOnly": ".core.errors",
    "OutOfOrder": ".core.errors",
    "NoFamily": ".core.errors",
    "LocalOnly": ".core.errors",
    "hookimpl": ".core.host.hookspecs",
}

__all__ = ["StandardizedTransformer", "Unavailable", "ReadOnly", "OutOfOrder", "NoFamily", "LocalOnly", "hookimpl"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'vlreg' has no attribute {name!r}")
    found = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
