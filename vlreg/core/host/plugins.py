"""The plugin host: one pluggy manager, built-in and third-party plugins alike.

Plugins are found through the ``vlreg`` entry-point group, the built-in families
included (each is its own distribution under ``plugins/``), so a family written
outside this repository registers exactly as the built-in ones do. Tests register
a plugin object directly with `register` and take it away with `unregister`.

Loading survives bad plugins: each entry point loads on its own, and one that fails
to import or register is named in a single warning while the rest load
(``VLREG_STRICT_PLUGINS=1`` makes that an error). ``VLREG_LOAD_PLUGINS`` (a comma-
separated allowlist of entry-point names; empty loads none) and
``VLREG_DISABLE_PLUGINS`` (a blocklist) choose what loads; a name in either that no
installed plugin has is warned about.

Every registration is validated at once: a hook implementation whose name or
arguments match no hookspec fails (pluggy's ``check_pending``). Who serves a part is settled from every claim on it,
never from the order plugins load in: one claim serves it; a claim that says it
``overrides`` another plugin beats that plugin's; two claims where neither overrides
the other leave that one part *contested*, served by neither (a warning names both
and the ways out), while every other claim of both plugins stands.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from typing import Any

import pluggy

from . import catalog, hookspecs
from .parts import Claim

ENTRY_POINT_GROUP = hookspecs.PROJECT

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
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _load_entry_points() -> None:
    allowed, disabled = _names("VLREG_LOAD_PLUGINS"), _names("VLREG_DISABLE_PLUGINS") or set()
    entry_points = _entry_points()
    _warn_unknown_names(entry_points, allowed, disabled)
    failures = []
    for entry_point in entry_points:
        where = f"{entry_point.name!r} ({_dist_name(entry_point.dist)})"
        if entry_point.name in disabled:
            skipped[entry_point.name] = DISABLED
            continue
        if allowed is not None and entry_point.name not in allowed:
            skipped[entry_point.name] = NOT_ALLOWED
            continue
        try:
            plugin = entry_point.load()
            register(plugin, name=entry_point.name, distribution=entry_point.dist)
        except Exception as error:  # one broken plugin must not take the others down
            if os.environ.get("VLREG_STRICT_PLUGINS") == "1":
                raise RuntimeError(f"vlreg plugin {where} failed to load: {error}") from error
            skipped[entry_point.name] = f"failed: {type(error).__name__}: {error}"
            failures.append(f"{where}: {type(error).__name__}: {error}")
        else:
            _check_declared(entry_point, plugin)
    if failures:
        warnings.warn(
            "vlreg skipped plugins that failed to load (set VLREG_STRICT_PLUGINS=1 to make this "
            "an error): " + "; ".join(failures),
            stacklevel=3,
        )


def _warn_unknown_names(entry_points: list, allowed: set[str] | None, disabled: set[str]) -> None:
    installed = {entry_point.name for entry_point in entry_points}
    for variable, names in (("VLREG_LOAD_PLUGINS", allowed or set()), ("VLREG_DISABLE_PLUGINS", disabled)):
        unknown = sorted(names - installed)
        if unknown:
            warnings.warn(
                f"{variable} names {', '.join(map(repr, unknown))}, which no installed vlreg plugin is "
                f"called; the installed plugins are {', '.join(sorted(installed)) or 'none'} "
                f"(`vlreg plugins --all` lists them).",
                stacklevel=4,
            )


def register(plugin: Any, name: str | None = None, distribution: Any = None) -> str:
    """Register ``plugin`` (a module or object with hook implementations).

    Raises if a hook implementation matches no hookspec; the plugin is then not registered. A claim on a part
    another plugin claims too, with neither overriding the other, does not fail the
    registration: that part becomes contested, served by neither, with a warning.
    """
    manager = plugin_manager()
    holder = manager.get_plugin(name) if name is not None else None
    if holder is not None:
        raise ValueError(
            f"two plugins are named {name!r}: {describe(holder)} and one from "
            f"{_dist_name(distribution)}; uninstall one of them."
        )
    name = manager.register(plugin, name=name)
    _distributions[id(plugin)] = distribution
    try:
        manager.check_pending()
        made = [_as_claim(claim) for claim in call(plugin, "vlreg_claims") or []]
    except Exception:
        manager.unregister(plugin)
        _distributions.pop(id(plugin), None)
        raise
    for claim in dict.fromkeys(made):
        _claims.setdefault((claim.kind, claim.model_type), []).append((plugin, claim))
    for claim in dict.fromkeys(made):
        key = (claim.kind, claim.model_type)
        if contenders(*key):
            warnings.warn(contested_message(*key), stacklevel=2)
    return name


def _as_claim(claim: Any) -> Claim:
    return claim if isinstance(claim, Claim) else Claim(*claim)


def _standing(kind: str, model_type: str) -> list[Any]:
    """The plugins whose claim on the part no other claim on it overrides."""
    entries = _claims.get((kind, model_type), [])
    names = {id(plugin): _name(plugin) for plugin, _ in entries}
    overridden = {claim.overrides for _, claim in entries if claim.overrides is not None}
    standing = {id(plugin): plugin for plugin, _ in entries if names[id(plugin)] not in overridden}
    return list(standing.values())


def claimant(kind: str, model_type: str) -> Any | None:
    """The plugin that serves this part, or ``None`` (unclaimed, or contested)."""
    plugin_manager()
    standing = _standing(kind, model_type)
    return standing[0] if len(standing) == 1 else None


def refusals(kind: str, model_type: str) -> dict[str, str]:
    """What the plugin serving this part declares it refuses there (`Claim.refuses`):
    ``{name: reason}``, empty where it serves the part whole or nothing serves it."""
    holder = claimant(kind, model_type)
    merged: dict[str, str] = {}
    for plugin, claim in _claims.get((kind, model_type), []):
        if plugin is holder:
            merged.update(claim.refuses)
    return merged


def contenders(kind: str, model_type: str) -> list[Any]:
    """The plugins contesting this part (none where one plugin serves it or none claims it)."""
    plugin_manager()
    standing = _standing(kind, model_type)
    if len(standing) == 1:
        return []
    if standing:
        return standing
    return list({id(p): p for p, _ in _claims.get((kind, model_type), [])}.values())


def contested_message(kind: str, model_type: str) -> str:
    """Why a contested part is served by no plugin, and the two ways out."""
    rivals = contenders(kind, model_type)
    named = " and ".join(describe(plugin) for plugin in rivals)
    names = [_name(plugin) for plugin in rivals]
    return (
        f"the {kind} part {model_type!r} is claimed by {named}, and neither claim overrides "
        f"the other, so neither serves it (their other claims stand). Disable one "
        f"(VLREG_DISABLE_PLUGINS={names[0]}, or uninstall it), or have one claim it with "
        f"overrides={names[-1]!r}."
    )


def unregister(plugin: Any) -> None:
    """Take ``plugin`` out of the host, with its claims; a part it served by
    overriding another plugin goes back to that plugin."""
    plugin_manager().unregister(plugin)
    _distributions.pop(id(plugin), None)
    for key in list(_claims):
        _claims[key] = [(p, claim) for p, claim in _claims[key] if p is not plugin]
        if not _claims[key]:
            del _claims[key]


def claims() -> dict[tuple[str, str], Any]:
    """Every part served: ``{(kind, model_type): plugin}`` (contested parts left out)."""
    plugin_manager()
    served = {key: claimant(*key) for key in _claims}
    return {key: plugin for key, plugin in served.items() if plugin is not None}


def not_loaded_serving(kind: str, model_type: str) -> list[tuple[str, str, str]]:
    """Installed plugins that would serve this part but were not loaded by choice
    (disabled, or left out of ``VLREG_LOAD_PLUGINS``): ``[(entry point, distribution, why)]``.

    Their claims are read off their distribution's metadata (`catalog.declared`), so a
    plugin held back is never run; one whose distribution declares nothing is imported
    to ask it, and never registered.
    """
    found = []
    for entry_point in _entry_points():
        why = skipped.get(entry_point.name)
        if why not in (DISABLED, NOT_ALLOWED):
            continue
        if (kind, model_type) in _claims_declared(entry_point):
            found.append((entry_point.name, _dist_name(entry_point.dist), why))
    return found


def _claims_declared(entry_point: importlib.metadata.EntryPoint) -> set[tuple[str, str]]:
    declared = catalog.declared(entry_point)
    if declared is not None:
        return declared["claims"]
    try:
        made = getattr(entry_point.load(), "vlreg_claims")() or []
    except Exception:  # a plugin that cannot say is not named
        return set()
    return {(claim.kind, claim.model_type) for claim in map(_as_claim, made)}


def _check_declared(entry_point: importlib.metadata.EntryPoint, plugin: Any) -> None:
    """Warn where a plugin's metadata (what the host says of it when it is not loaded)
    and its hooks disagree."""
    declared = catalog.declared(entry_point)
    if declared is None:
        return
    made = {key for key, entries in _claims.items() if any(p is plugin for p, _ in entries)}
    refused = {(*key, name) for key, entries in _claims.items() for p, claim in entries if p is plugin
               for name in claim.refuses}
    offered = set(call(plugin, "vlreg_adapters") or {})
    wrong = [f"{what}: {', '.join(sorted(items))}" for what, items in (
        (f"claims missing from {catalog.CLAIMS}", {":".join(key) for key in made - declared["claims"]}),
        (f"{catalog.CLAIMS} it does not claim", {":".join(key) for key in declared["claims"] - made}),
        (f"refusals missing from {catalog.REFUSES}", {":".join(key) for key in refused - declared["refuses"]}),
        (f"{catalog.REFUSES} its claims do not make", {":".join(key) for key in declared["refuses"] - refused}),
        (f"adapters missing from {catalog.ADAPTERS}", offered - declared["adapters"]),
        (f"{catalog.ADAPTERS} it does not publish", declared["adapters"] - offered),
    ) if items]
    if wrong:
        warnings.warn(
            f"{describe(plugin)}: its entry-point metadata and its hooks disagree ({'; '.join(wrong)}), so the host "
            f"misnames it while it is not loaded: make the entry points in its pyproject.toml match its hooks.",
            stacklevel=4,
        )


def adapter(name: str) -> Any:
    """What a plugin publishes as ``name`` (`vlreg_adapters`), for another plugin to build on.

    Asked at import time too: a plugin not registered yet, or disabled, is imported to
    ask it (disabling a plugin stops what it serves, not the code other plugins build
    on). Two plugins publishing one name is an error naming both.
    """
    # The host is not started from here: a plugin asking at import time may be the one
    # the host is loading, not finished yet.
    registered = sorted(_manager.get_plugins(), key=_name) if _manager is not None else []
    found = [(plugin, offer[name]) for plugin in registered
             if name in (offer := call(plugin, "vlreg_adapters") or {})]
    if not found:
        for entry_point in _entry_points():
            if _manager is not None and _manager.get_plugin(entry_point.name) is not None:
                continue
            try:
                module = entry_point.load()
                offer = module.vlreg_adapters() if hasattr(module, "vlreg_adapters") else {}
            except Exception:  # a plugin that cannot say does not publish it
                continue
            if name in (offer or {}):
                found.append((module, offer[name]))
    if not found:
        where = " or ".join(f"{dist} ({folder})" for dist, folder in catalog.publishing(name))
        raise LookupError(
            f"no installed vlreg plugin publishes the adapter {name!r}: "
            f"{'install ' + where if where else 'install the plugin that publishes it'}"
        )
    if len({id(plugin) for plugin, _ in found}) > 1:
        named = " and ".join(describe(plugin) for plugin, _ in found)
        raise LookupError(f"the adapter {name!r} is published by {named}: uninstall or disable one of them")
    return found[0][1]


def call(plugin: Any, hook: str, **kwargs: Any) -> Any:
    """Call ``hook`` on ``plugin`` alone: what it contributes, or ``None``.

    Parts are served by the plugin that claimed them, so the host never asks the
    other plugins, whatever they implement.
    """
    manager = plugin_manager()
    others = [p for p in manager.get_plugins() if p is not plugin]
    result = manager.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
    if not getattr(manager.hook, hook).spec.opts.get("firstresult"):  # a list of the one plugin's answer
        return result[0] if result else None
    return result


def distribution(plugin: Any) -> importlib.metadata.Distribution | None:
    """The distribution that installed ``plugin`` (``None`` if registered by hand)."""
    return _distributions.get(id(plugin))


def describe(plugin: Any, name: str | None = None) -> str:
    """A plugin as a person reads it: its name and the distribution it came from."""
    return f"plugin {name or _name(plugin)!r} ({_dist_name(_distributions.get(id(plugin)))})"


def _name(plugin: Any) -> str | None:
    return plugin_manager().get_name(plugin)


def _dist_name(dist: Any) -> str:
    if dist is None:
        return "registered by hand"
    return f"{dist.name} {dist.version}"
