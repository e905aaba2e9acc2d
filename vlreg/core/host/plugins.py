"""The plugin host: one pluggy manager, built-in and third-party plugins alike.

Plugins are found through the ``vlreg`` entry-point group (each built-in family is its own
distribution under ``plugins/``, registered exactly as a third party's is), and each loads on
its own: one that fails to import or register is named in one warning and the rest load
(``VLREG_STRICT_PLUGINS=1`` makes that an error). ``VLREG_LOAD_PLUGINS`` (an allowlist of
entry-point names; empty loads none) and ``VLREG_DISABLE_PLUGINS`` (a blocklist) choose what
loads; a name in either that no installed plugin has is warned about. A plugin held back so
is never registered; where a checkpoint needs it, its module (the declaration, which imports
no modeling code) is imported to name it for what it would serve.

A registration is checked at once: a hook whose name or arguments match no hookspec fails
(pluggy's ``check_pending``). Who serves a part is settled from every claim on it, never from
load order: one claim serves it; a claim that ``overrides`` another plugin beats that
plugin's; two claims where neither overrides the other leave that part *contested*, served
by neither (a warning names both and the ways out), every other claim of both standing.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from typing import Any

import pluggy

from . import catalog, hookspecs
from .parts import Claim

_manager: pluggy.PluginManager | None = None
#: (kind, model_type) -> every (plugin, claim) on that part, in registration order
_claims: dict[tuple[str, str], list[tuple[Any, Claim]]] = {}
#: id(plugin) -> the distribution that installed it (None for one registered by hand)
_distributions: dict[int, importlib.metadata.Distribution | None] = {}
#: entry-point name -> why it is not loaded (disabled, not allowed, or the error)
skipped: dict[str, str] = {}
DISABLED = "disabled by VLREG_DISABLE_PLUGINS"
NOT_ALLOWED = "not in VLREG_LOAD_PLUGINS"


def plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, loading the installed plugins on first use."""
    global _manager
    if _manager is None:
        _manager = pluggy.PluginManager(hookspecs.PROJECT)
        _manager.add_hookspecs(hookspecs)
        _load_entry_points()
    return _manager


def _names(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    return None if value is None else {name.strip() for name in value.split(",") if name.strip()}


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=hookspecs.PROJECT), key=lambda ep: ep.name)


def _load_entry_points() -> None:
    allowed, disabled = _names("VLREG_LOAD_PLUGINS"), _names("VLREG_DISABLE_PLUGINS") or set()
    entry_points = _entry_points()
    installed = {entry_point.name for entry_point in entry_points}
    for variable, names in (("VLREG_LOAD_PLUGINS", allowed or set()), ("VLREG_DISABLE_PLUGINS", disabled)):
        if unknown := sorted(names - installed):
            warnings.warn(f"{variable} names {', '.join(map(repr, unknown))}, which no installed vlreg plugin is "
                          f"called; the installed plugins are {', '.join(sorted(installed)) or 'none'} "
                          f"(`vlreg plugins --all` lists them).", stacklevel=3)
    failures = []
    for entry_point in entry_points:
        if entry_point.name in disabled:
            skipped[entry_point.name] = DISABLED
            continue
        if allowed is not None and entry_point.name not in allowed:
            skipped[entry_point.name] = NOT_ALLOWED
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
    """Register ``plugin`` (a `Plugin`, or a module or object with hook implementations).

    Raises if a hook implementation matches no hookspec; the plugin is then not registered.
    A claim on a part another plugin claims too, neither overriding the other, does not
    fail the registration: that part becomes contested, served by neither, with a warning.
    """
    manager = plugin_manager()
    holder = manager.get_plugin(name) if name is not None else None
    if holder is not None:
        raise ValueError(f"two plugins are named {name!r}: {describe(holder)} and one from "
                         f"{_dist_name(distribution)}; uninstall one of them.")
    name = manager.register(plugin, name=name)
    _distributions[id(plugin)] = distribution
    try:
        manager.check_pending()
        made = dict.fromkeys(claims_of(plugin))
    except Exception:
        manager.unregister(plugin)
        _distributions.pop(id(plugin), None)
        raise
    for claim in made:
        _claims.setdefault((claim.kind, claim.model_type), []).append((plugin, claim))
    for claim in made:
        if contenders(claim.kind, claim.model_type):
            warnings.warn(contested_message(claim.kind, claim.model_type), stacklevel=2)
    return name


def unregister(plugin: Any) -> None:
    """Take ``plugin`` out, with its claims; a part it took by overriding another plugin
    goes back to that plugin."""
    plugin_manager().unregister(plugin)
    _distributions.pop(id(plugin), None)
    for key in list(_claims):
        _claims[key] = [(p, claim) for p, claim in _claims[key] if p is not plugin]
        if not _claims[key]:
            del _claims[key]


def ask(plugin: Any, hook: str) -> Any:
    """A hook that takes no part (``vlreg_claims``, ``vlreg_adapters``,
    ``vlreg_checkpoints``) asked of ``plugin`` directly, registered or not: how a plugin
    held back, or one being registered, is asked without running the host."""
    function = getattr(plugin, hook, None)
    return function() if callable(function) else None


def claims_of(plugin: Any) -> list[Claim]:
    """What ``plugin`` claims (a plain ``(kind, model_type)`` is taken as a `Claim`)."""
    return [claim if isinstance(claim, Claim) else Claim(*claim) for claim in ask(plugin, "vlreg_claims") or []]


def _standing(kind: str, model_type: str) -> list[Any]:
    """The plugins whose claim on the part no other claim on it overrides."""
    entries = _claims.get((kind, model_type), [])
    overridden = {claim.overrides for _, claim in entries if claim.overrides is not None}
    return list({id(p): p for p, _ in entries if _name(p) not in overridden}.values())


def claimant(kind: str, model_type: str) -> Any | None:
    """The plugin that serves this part, or ``None`` (unclaimed, or contested)."""
    plugin_manager()
    standing = _standing(kind, model_type)
    return standing[0] if len(standing) == 1 else None


def contenders(kind: str, model_type: str) -> list[Any]:
    """The plugins contesting this part (none where one plugin serves it or none claims it)."""
    plugin_manager()
    standing = _standing(kind, model_type)
    if len(standing) == 1:
        return []
    return standing or list({id(p): p for p, _ in _claims.get((kind, model_type), [])}.values())


def contested_message(kind: str, model_type: str) -> str:
    """Why a contested part is served by no plugin, and the two ways out."""
    rivals = contenders(kind, model_type)
    names = [_name(plugin) for plugin in rivals]
    return (
        f"the {kind} part {model_type!r} is claimed by {' and '.join(map(describe, rivals))}, and neither claim "
        f"overrides the other, so neither serves it (their other claims stand). Disable one "
        f"(VLREG_DISABLE_PLUGINS={names[0]}, or uninstall it), or have one claim it with overrides={names[-1]!r}."
    )


def claims() -> dict[tuple[str, str], Any]:
    """Every part served: ``{(kind, model_type): plugin}`` (contested parts left out)."""
    plugin_manager()
    served = {key: claimant(*key) for key in _claims}
    return {key: plugin for key, plugin in served.items() if plugin is not None}


def refusals(kind: str, model_type: str) -> dict[str, str]:
    """What the plugin serving this part declares it refuses there (`Claim.refuses`):
    ``{name: reason}``, empty where it serves the part whole or nothing serves it."""
    holder = claimant(kind, model_type)
    merged: dict[str, str] = {}
    for plugin, claim in _claims.get((kind, model_type), []):
        if plugin is holder:
            merged.update(claim.refuses)
    return merged


def _imported(entry_point: importlib.metadata.EntryPoint) -> Any | None:
    try:
        return entry_point.load()
    except Exception:  # a plugin that cannot be imported cannot be asked
        return None


def not_loaded_serving(kind: str, model_type: str) -> list[tuple[str, str, str]]:
    """Installed plugins held back by choice (disabled, or left out of ``VLREG_LOAD_PLUGINS``)
    that would serve this part: ``[(entry point, distribution, why)]``. Each is imported to
    be asked, never registered; one that cannot be imported is not named."""
    plugin_manager()
    return [(entry_point.name, _dist_name(entry_point.dist), skipped[entry_point.name])
            for entry_point in _entry_points() if skipped.get(entry_point.name) in (DISABLED, NOT_ALLOWED)
            and (kind, model_type) in {(c.kind, c.model_type) for c in claims_of(_imported(entry_point))}]


def adapter(name: str) -> Any:
    """What a plugin publishes as ``name`` (`vlreg_adapters`), for another plugin to build on.

    Asked at import time too: a plugin not registered yet, or disabled, is imported to ask
    it (disabling a plugin stops what it serves, not the code other plugins build on). Two
    plugins publishing one name is an error naming both.
    """
    # The host is not started from here: a plugin asking at import time may be the one the
    # host is loading, not finished yet.
    registered = sorted(_manager.get_plugins(), key=_name) if _manager is not None else []
    found = [(plugin, offer[name]) for plugin in registered if name in (offer := ask(plugin, "vlreg_adapters") or {})]
    if not found:
        for entry_point in _entry_points():
            if _manager is None or _manager.get_plugin(entry_point.name) is None:
                plugin = _imported(entry_point)
                if name in (offer := ask(plugin, "vlreg_adapters") or {}):
                    found.append((plugin, offer[name]))
    if not found:
        where = " or ".join(f"{dist} ({folder})" for dist, folder in catalog.publishing(name))
        raise LookupError(f"no installed vlreg plugin publishes the adapter {name!r}: "
                          f"{'install ' + where if where else 'install the plugin that publishes it'}")
    if len({id(plugin) for plugin, _ in found}) > 1:
        named = " and ".join(describe(plugin) for plugin, _ in found)
        raise LookupError(f"the adapter {name!r} is published by {named}: uninstall or disable one of them")
    return found[0][1]


def call(plugin: Any, hook: str, **kwargs: Any) -> Any:
    """Call ``hook`` on ``plugin`` alone: what it contributes, or ``None``. Parts are served
    by the plugin that claimed them, so the host never asks the others."""
    manager = plugin_manager()
    others = [p for p in manager.get_plugins() if p is not plugin]
    result = manager.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
    if not getattr(manager.hook, hook).spec.opts.get("firstresult"):  # a list of the one plugin's answer
        return result[0] if result else None
    return result


def distribution(plugin: Any) -> importlib.metadata.Distribution | None:
    """The distribution that installed ``plugin`` (``None`` if registered by hand)."""
    return _distributions.get(id(plugin))


def describe(plugin: Any) -> str:
    """A plugin as a person reads it: its name and the distribution it came from."""
    return f"plugin {_name(plugin)!r} ({_dist_name(_distributions.get(id(plugin)))})"


def _name(plugin: Any) -> str | None:
    return plugin_manager().get_name(plugin)


def _dist_name(dist: Any) -> str:
    return "registered by hand" if dist is None else f"{dist.name} {dist.version}"
