"""How vlreg's objects travel in a remote request: by reference, never by value.

nnsight pickles a remote trace's model and envoys (`vlreg.core.remote`). Envoy classes, and
the value descriptors on them, are named by reference: a class a plugin makes at import
(vlreg-gemma's described attentions) by its module, its name and the order it was made in
(`class_reference`), so its descriptors are never pickled. A family's maps pickle as empty
dicts (`ServerSide`): a server binds names from its own plugins, never the client's.
"""

from __future__ import annotations

import copy
import importlib
import sys
from typing import Any

from ..errors import LocalOnly

#: Every standard envoy class, by (module, qualified name), in the order made.
_MADE: dict[tuple[str, str], list[type]] = {}


class ServerSide(dict):
    """A family's map (its ``rename`` or ``envoys``) that a remote request does not carry:
    it pickles as an empty dict, and the model that arrives fills in its own family's
    (`arrived`). A server binds names from its own plugins, never the client's."""

    def __reduce__(self) -> tuple:
        return dict, ()

    def __copy__(self) -> "ServerSide":
        return ServerSide(self)

    def __deepcopy__(self, memo: dict) -> "ServerSide":
        return ServerSide(copy.deepcopy(dict(self), memo))


class ByReference:
    """Base of `Standard`: every envoy class is recorded as it is made, and an envoy
    pickles as its class's `class_reference` and the state nnsight's Envoy gives it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _MADE.setdefault((cls.__module__, cls.__qualname__), []).append(cls)

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return envoy_of, (class_reference(type(self)),), self.__getstate__()


def class_reference(cls: type) -> Any:
    """How a pickle names ``cls``: the class itself where it can be imported by name,
    else ``(module, qualified name, serial)``, the serial counting the classes of that
    name its module made before it (importing the module makes them again, in order).

    A class a module-level function made from another (`made_by`) is named as that function
    and its argument's reference: the server calls it again. Raises `LocalOnly` for a class
    made inside a function otherwise, which no server can make."""
    made = cls.__dict__.get("_made_by")
    if made is not None:
        maker, base = made
        return "made", maker.__module__, maker.__qualname__, class_reference(base)
    found: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is cls:
        return cls
    if "<locals>" in cls.__qualname__:
        raise LocalOnly(
            f"the envoy class {cls.__module__}.{cls.__qualname__} was made inside a function, so a "
            f"server cannot make it: define it (or the function that makes it) at module level in "
            f"the plugin, or trace without remote="
        )
    return cls.__module__, cls.__qualname__, _MADE[(cls.__module__, cls.__qualname__)].index(cls)


def made_by(maker: Any, base: type) -> dict:
    """The class-body entry marking a class as ``maker(base)``'s (a module-level function,
    cached, so that calling it again gives the same class): `class_reference` names it so."""
    return {"_made_by": (maker, base)}


def resolve_class(reference: Any) -> type:
    """The class a `class_reference` names, importing its module if need be."""
    if isinstance(reference, type):
        return reference
    if reference[0] == "made":
        _, module, maker, base = reference
        return getattr(importlib.import_module(module), maker)(resolve_class(base))
    module, qualname, serial = reference
    importlib.import_module(module)
    return _MADE[(module, qualname)][serial]


def envoy_of(reference: Any) -> Any:
    """An empty envoy of the referenced class, for pickle to fill with its state."""
    cls = resolve_class(reference)
    return cls.__new__(cls)


def descriptor_of(reference: Any, name: str) -> Any:
    """The value descriptor ``name`` of the referenced class."""
    return getattr(resolve_class(reference), name)
