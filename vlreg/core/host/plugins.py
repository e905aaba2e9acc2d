"""The plugin host: one pluggy manager over the ``vlreg`` entry-point group, built-in and
third-party plugins alike, each loaded on its own (one that fails is named in one warning;
``VLREG_STRICT_PLUGINS=1``: an error). ``VLREG_LOAD_PLUGINS`` and ``VLREG_DISABLE_PLUGINS``
choose what loads; one held back is imported to be asked what it would serve, never
registered; one not installed is named from ``catalog.json``. Who serves a part is settled
from every claim on it, never from load order (`claimant`)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs
from .parts import Claim, Part

CATALOG = Path(__file__).with_name("catalog.json")
DISABLED, NOT_ALLOWED = "disabled by VLREG_DISABLE_PLUGINS", "not in VLREG_LOAD_PLUGINS"
#: entry-point name -> why it is not loaded (held back, or the error)
skipped: dict[str, str] = {}
_manager: pluggy.PluginManager | None = None
#: id(plugin) -> (the distribution that installed it or None, its claims)
_registered: dict[int, tuple[Any, list[Claim]]] = {}


def plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, loading the installed plugins on first use."""
    global _manager
    if _manager is None:
        _manager = pluggy.PluginManager(hookspecs.PROJECT)
        _manager.add_hookspecs(hookspecs)
        _load_entry_points()
    return _manager


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The installed ``vlreg`` entry points, by name: read once for each ``sys.path`` (a read
    opens every installed distribution's metadata, ~15 ms; a load asks for them once for
    each adapter a plugin imports)."""
    return _entry_points_on(tuple(sys.path))


@cache
def _entry_points_on(path: tuple[str, ...]) -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=hookspecs.PROJECT), key=lambda ep: ep.name)


def _load_entry_points() -> None:
    named = {variable: None if (value := os.environ.get(variable)) is None else
             {name.strip() for name in value.split(",") if name.strip()}
             for variable in ("VLREG_LOAD_PLUGINS", "VLREG_DISABLE_PLUGINS")}
    allowed, disabled = named["VLREG_LOAD_PLUGINS"], named["VLREG_DISABLE_PLUGINS"] or set()
    entry_points = _entry_points()
    installed = sorted(entry_point.name for entry_point in entry_points)
    for variable, unknown in ((variable, sorted((names or set()) - set(installed))) for variable, names in named.items()):
        if unknown:
            warnings.warn(f"{variable} names {', '.join(map(repr, unknown))}, which no installed vlreg plugin is called; the "
                          f"installed plugins are {', '.join(installed) or 'none'} (`vlreg plugins --all`).", stacklevel=3)
    failures = []
    for entry_point in entry_points:
        if entry_point.name in disabled or (allowed is not None and entry_point.name not in allowed):
            skipped[entry_point.name] = DISABLED if entry_point.name in disabled else NOT_ALLOWED
            continue
        try:
            register(entry_point.load(), name=entry_point.name, distribution=entry_point.dist)
        except Exception as error:  # one broken plugin must not take the others down
            where = f"{entry_point.name!r} ({_dist_name(entry_point.dist)})"
            if os.environ.get("VLREG_STRICT_PLUGINS") == "1":
                raise RuntimeError(f"vlreg plugin {where} failed to load: {error}") from error
            skipped[entry_point.name] = f"failed: {type(error).__name__}: {error}"
            failures.append(f"{where}: {type(error).__name__}: {error}")
    if failures:
        warnings.warn("vlreg skipped plugins that failed to load (set VLREG_STRICT_PLUGINS=1 to make this an "
                      "error): " + "; ".join(failures), stacklevel=3)


def register(plugin: Any, name: str | None = None, distribution: Any = None) -> str:
    """Register ``plugin`` (a `Plugin`, or a module or object of hook functions); raises,
    registering nothing, if a hook matches no hookspec. A part it contests: a warning."""
    manager = plugin_manager()
    if name is not None and (holder := manager.get_plugin(name)) is not None:
        raise ValueError(f"two plugins are named {name!r}: {describe(holder)} and one from "
                         f"{_dist_name(distribution)}; uninstall one of them.")
    name = manager.register(plugin, name=name)
    try:
        manager.check_pending()
        _registered[id(plugin)] = (distribution, list(dict.fromkeys(claims_of(plugin))))
    except Exception:
        manager.unregister(plugin)
        raise
    for claim in _made(plugin):
        if contenders(claim.kind, claim.model_type):
            warnings.warn(contested_message(claim.kind, claim.model_type), stacklevel=2)
    return name


def unregister(plugin: Any) -> None:
    """Take ``plugin`` out with its claims (a part it took by overriding goes back)."""
    plugin_manager().unregister(plugin)
    _registered.pop(id(plugin), None)


def ask(plugin: Any, hook: str) -> Any:
    """A hook that takes no part asked of ``plugin`` directly, registered or not."""
    function = getattr(plugin, hook, None)
    return function() if callable(function) else None


def claims_of(plugin: Any) -> list[Claim]:
    """What ``plugin`` claims (a plain ``(kind, model_type)`` is taken as a `Claim`)."""
    return [claim if isinstance(claim, Claim) else Claim(*claim) for claim in ask(plugin, "vlreg_claims") or []]


def _made(plugin: Any) -> list[Claim]:
    return _registered.get(id(plugin), (None, []))[1]


def _standing(kind: str, model_type: str) -> tuple[list[Any], list[Any]]:
    """The plugins claiming the part, in registration order, and those no other claim overrides."""
    entries = [(p, claim) for _, p in plugin_manager().list_name_plugin() for claim in _made(p)
               if (claim.kind, claim.model_type) == (kind, model_type)]
    overridden = {claim.overrides for _, claim in entries}
    claiming = list({id(p): p for p, _ in entries}.values())
    return claiming, [p for p in claiming if _name(p) not in overridden]


def claimant(kind: str, model_type: str) -> Any | None:
    """The plugin that serves this part, or ``None`` (unclaimed, or contested)."""
    standing = _standing(kind, model_type)[1]
    return standing[0] if len(standing) == 1 else None


def contenders(kind: str, model_type: str) -> list[Any]:
    """The plugins contesting this part (none where one plugin serves it or none claims it)."""
    claiming, standing = _standing(kind, model_type)
    return [] if len(standing) == 1 else standing or claiming


def contested_message(kind: str, model_type: str) -> str:
    """Why a contested part is served by no plugin, and the two ways out."""
    rivals = contenders(kind, model_type)
    names = [_name(plugin) for plugin in rivals]
    return (f"the {kind} part {model_type!r} is claimed by {' and '.join(map(describe, rivals))}, and neither claim "
            f"overrides the other, so neither serves it (their other claims stand). Disable one "
            f"(VLREG_DISABLE_PLUGINS={names[0]}, or uninstall it), or have one claim it with overrides={names[-1]!r}.")


def claims() -> dict[tuple[str, str], Any]:
    """Every part served: ``{(kind, model_type): plugin}`` (contested parts left out)."""
    parts = {(claim.kind, claim.model_type) for _, p in plugin_manager().list_name_plugin() for claim in _made(p)}
    return {key: plugin for key in sorted(parts) if (plugin := claimant(*key)) is not None}


def refusals(kind: str, model_type: str) -> dict[str, str]:
    """What the plugin serving this part declares it refuses there (`Claim.refuses`)."""
    return {name: why for claim in _made(claimant(kind, model_type))
            if (claim.kind, claim.model_type) == (kind, model_type) for name, why in claim.refuses.items()}


def declined(kind: str, model_type: str) -> str | None:
    """Why the plugin claiming this part never serves its type (`Claim.declines`), or ``None``."""
    return next((claim.declines for claim in _made(claimant(kind, model_type))
                 if (claim.kind, claim.model_type) == (kind, model_type) and claim.declines), None)


def _imported(entry_point: importlib.metadata.EntryPoint) -> Any | None:
    try:
        return entry_point.load()
    except Exception:  # a plugin that cannot be imported cannot be asked
        return None


@cache
def catalog() -> dict[str, dict]:
    """The repository's plugins: ``{distribution: {"folder", "claims", "adapters"}}``."""
    return json.loads(CATALOG.read_text())


def _install(key: str, what: str) -> str:
    """How to install the repository's distributions whose catalog ``what`` holds ``key``."""
    return " or ".join(f"install the {dist} distribution (from the vlreg repository: pip install "
                       f"./{entry['folder']})" for dist, entry in catalog().items() if key in entry[what])


def why_unserved(part: Part, wrapper: Any) -> str:
    """Why no plugin serves ``part`` (``wrapper`` serves its checkpoint's wrapper) and what would:
    a contest's ways out, a plugin held back (asked, never registered), else the `catalog`'s."""
    kind, model_type = part.kind, part.model_type
    if contenders(kind, model_type):
        return f"{part.root.model_type!r} cannot load: {contested_message(kind, model_type)}"
    held_back = [f"{ep.name!r} ({skipped[ep.name]}) from {_dist_name(ep.dist)}" for ep in _entry_points()
                 if skipped.get(ep.name) in (DISABLED, NOT_ALLOWED)
                 and (kind, model_type) in {(c.kind, c.model_type) for c in claims_of(_imported(ep))}]
    which = "loaded" if held_back else "installed"
    what = (f"No {which} vlreg plugin serves model_type {model_type!r}" if kind == "wrapper" else
            f"The {part.root.model_type!r} checkpoint is served by {describe(wrapper)}, but no {which} plugin "
            f"serves its {kind} model, model_type {model_type!r}")
    if held_back:
        return (f"{what}. An installed plugin that serves it was not loaded: {'; '.join(held_back)}. Enable it "
                f"(take it out of VLREG_DISABLE_PLUGINS, or add it to VLREG_LOAD_PLUGINS) to load this checkpoint.")
    installed = ", ".join(sorted(served for (role, served) in claims() if role == "wrapper")) or "none"
    fix = (_install(f"{kind}:{model_type}", "claims")
           or "no known plugin serves it; docs/writing-a-plugin.md shows how to write one")
    return f"{what}. Installed families: {installed}. To load it, {fix}."


def adapter(name: str) -> Any:
    """What a plugin publishes as ``name`` (`vlreg_adapters`), for another plugin to build on.
    Asked at import time too, so the host is not started here: a plugin not registered yet, or
    held back, is imported to ask it. Two publishers are an error."""
    def offers(candidates: Any) -> list[tuple[Any, Any]]:
        return [(plugin, offer[name]) for plugin in candidates if name in (offer := ask(plugin, "vlreg_adapters") or {})]

    found = (offers(sorted(_manager.get_plugins(), key=_name) if _manager is not None else [])
             or offers(_imported(ep) for ep in _entry_points() if _manager is None or _manager.get_plugin(ep.name) is None))
    if not found:
        raise LookupError(f"no installed vlreg plugin publishes the adapter {name!r}: "
                          f"{_install(name, 'adapters') or 'install the plugin that publishes it'}")
    if len({id(plugin) for plugin, _ in found}) > 1:
        named = " and ".join(describe(plugin) for plugin, _ in found)
        raise LookupError(f"the adapter {name!r} is published by {named}: uninstall or disable one of them")
    return found[0][1]


def call(plugin: Any, hook: str, **kwargs: Any) -> Any:
    """Call ``hook`` on ``plugin`` alone: a part is served by the plugin that claimed it."""
    manager = plugin_manager()
    others = [p for p in manager.get_plugins() if p is not plugin]
    result = manager.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
    return result if getattr(manager.hook, hook).spec.opts.get("firstresult") else (result[0] if result else None)


def distribution(plugin: Any) -> importlib.metadata.Distribution | None:
    """The distribution that installed ``plugin`` (``None`` if registered by hand)."""
    return _registered.get(id(plugin), (None, []))[0]


def describe(plugin: Any) -> str:
    """A plugin as a person reads it: its name and the distribution it came from."""
    return f"plugin {_name(plugin)!r} ({_dist_name(distribution(plugin))})"


def _name(plugin: Any) -> str | None:
    return plugin_manager().get_name(plugin)


def _dist_name(dist: Any) -> str:
    return "registered by hand" if dist is None else f"{dist.name} {dist.version}"
