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

import functools
import threading
from pathlib import Path
from typing import Any

import nnsight


def travelling(state: dict) -> dict:
    """The model's pickled state, without what belongs to this process."""
    for name in ("_lock", "_run", "family", "_vlreg_options"):
        state.pop(name, None)
    return state


def arrived(model: Any) -> None:
    """Make what `travelling` left behind, on the side the model arrived on: a lock of its
    own, no last batch, and the family the installed plugins give its module's config,
    whose maps every envoy of the tree takes and whose entry every envoy's place names."""
    from .errors import NoFamily
    from .host.family import bind_anchored, resolve
    from .serving.batching import Run

    model._lock = threading.RLock()
    model._run = Run(None)
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
    bind_anchored(model, model.family.rename)  # the root's own aliases (`vlreg.core.host.family.ROOT`)
    if model.family.layers is not None:
        model.family.layers.mount(model)  # `layers` travels without its list (`InCallOrder`)
    model._place()


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


def remotely(model_of: Any = None, gradients: bool = False) -> Any:
    """Give a helper that runs traces a ``remote=`` keyword (``True``, a host, or ``"local"``):
    the whole helper then runs beside the server's model, in one ``model.session(remote=...)``,
    and what it returns is sent back. Its traces, its tower cache, the readout it applies
    after a trace and the geometry it computes are then all the server's: nothing of this
    process serves it. ``model_of`` maps the helper's first argument to the model (a
    dictionary's model); by default it is the model.

    ``gradients``: the helper backpropagates from a metric of its own traces, which has no
    gradient on an NDIF server (its model actor loads the weights frozen), so sending it to a
    server (``True`` or a host) is refused here, before anything is sent; ``"local"`` and a
    backend a test passes still run it."""

    def decorate(helper: Any) -> Any:
        @functools.wraps(helper)
        def run(*args: Any, remote: Any = False, **kwargs: Any) -> Any:
            if not remote:
                return helper(*args, **kwargs)
            if gradients and (remote is True or (isinstance(remote, str) and remote != "local")):
                from .errors import Unavailable

                raise Unavailable(
                    f"{helper.__name__} cannot run on an NDIF server: it takes gradients, and NDIF's model actor "
                    f"loads the weights frozen (requires_grad_(False)), so its metrics carry none there. Run it "
                    f"where the model is loaded, or read .grad in a remote trace of your own after "
                    f"model.token_embeddings.requires_grad_() (docs/remote.md)"
                )
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
