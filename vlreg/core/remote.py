"""vlreg on a server: what a remote trace carries, and what it refuses to carry.

nnsight sends a remote trace (``remote=True``, a host, or ``"local"``) as its block's
source and the objects the block names, cloudpickled: the model and its envoys by value,
their torch modules and the interleaver by persistent id (``Module:<native path>``),
which the server resolves to the model it has loaded. vlreg keeps to that:

* the model's per-process state stays home: its trace lock is made anew on the other
  side, the last trace's batch (`Run`) is cleared, and the family (names, predicates,
  scatter) is resolved there again from the server module's config by the server's own
  plugins; the family's rename and envoy maps pickle as empty dicts (`ServerSide`) and
  are filled from that family, so no rename map travels;
* envoy classes, and the value descriptors on them, travel by reference: a class a plugin
  makes at import (vlreg-gemma's described attentions) is named by its module, its name
  and the order it was made in (`class_reference`), never pickled with its descriptors;
* what only this process can serve refuses to be pickled (`LocalOnly`), so a trace that
  names it is refused while the request is serialized, before it is sent.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
import threading
from pathlib import Path
from typing import Any

import nnsight

from .errors import LocalOnly

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

    Raises `LocalOnly` for a class made inside a function, which no server can make."""
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


def resolve_class(reference: Any) -> type:
    """The class a `class_reference` names, importing its module if need be."""
    if isinstance(reference, type):
        return reference
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


def travelling(state: dict) -> dict:
    """The model's pickled state, without what belongs to this process."""
    for name in ("_lock", "_run", "_replaying", "family", "_vlreg_options"):
        state.pop(name, None)
    return state


def arrived(model: Any) -> None:
    """Make what `travelling` left behind, on the side the model arrived on: a lock of its
    own, no last batch, and the family the installed plugins give its module's config,
    whose maps every envoy of the tree takes."""
    from .batching import Run
    from .errors import NoFamily
    from .family import resolve

    model._lock = threading.RLock()
    model._run = Run(None)
    model._replaying = False
    try:
        model.family = resolve(model._module.config)
    except NoFamily as error:
        raise NoFamily(
            f"where the model arrived (a server, or remote='local''s rehearsal of one): {error} A server "
            f"resolves the family with its own plugins, so install the plugin in the model actor's "
            f"environment; remote='local' counts one importable only from outside site-packages "
            f"(PYTHONPATH, a pip --target folder) as not installed"
        ) from error
    for envoy in model.modules():
        envoy._rename = model.family.rename
        envoy._envoys = model.family.envoys


def model_key(model: Any, key: Any) -> str:
    """``key()`` (nnsight's key of the checkpoint), made offline for a local folder.

    nnsight canonicalizes a repo id through the hub, once per process
    (``nnsight.modeling.huggingface._ID_CACHE``); a local folder has no hub id, so its key
    names the folder by its absolute path, which a server must hold the checkpoint at."""
    from nnsight.modeling import huggingface

    from .loading import local_folder

    repo = model.repo_id
    folder = local_folder(repo) if isinstance(repo, str) else None
    if folder is not None:
        huggingface._ID_CACHE.setdefault(repo, str(Path(folder).resolve()))
    return key()


def remotely(model_of: Any = None) -> Any:
    """Give a helper that runs traces a ``remote=`` keyword (``True``, a host, or ``"local"``):
    the whole helper then runs beside the server's model, in one ``model.session(remote=...)``,
    and what it returns is sent back. Its traces, its tower cache, the readout it applies
    after a trace and the geometry it computes are then all the server's: nothing of this
    process serves it. ``model_of`` maps the helper's first argument to the model (a
    dictionary's model); by default it is the model."""

    def decorate(helper: Any) -> Any:
        @functools.wraps(helper)
        def run(*args: Any, remote: Any = False, **kwargs: Any) -> Any:
            if not remote:
                return helper(*args, **kwargs)
            model = args[0] if model_of is None else model_of(args[0])
            return on_server(model, remote, run, args, kwargs)

        return run

    return decorate


def on_server(model: Any, remote: Any, helper: Any, args: tuple, kwargs: dict) -> Any:
    """``helper(*args, **kwargs)`` run in one remote session of ``model`` (``remote`` may also
    be an nnsight backend, as tests pass one)."""
    from nnsight.tracing.backend import Backend

    how = {"backend": remote} if isinstance(remote, Backend) else {"remote": remote}
    with model.session(**how):
        result = nnsight.save(helper(*args, **kwargs))
    return result
