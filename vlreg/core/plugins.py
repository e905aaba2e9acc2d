"""The plugin host: one pluggy manager, built-in and third-party plugins alike.

Plugins are found through the ``vlreg`` entry-point group, the built-in families
included (each is its own distribution under ``plugins/``), so a family written
outside this repository registers exactly as the built-in ones do. Tests register
a plugin object directly with `register` and take it away with `unregister`.

Loading survives bad plugins: each entry point loads on its own, and one that fails
to import or register is named in a single warning while the rest load
(``VLREG_STRICT_PLUGINS=1`` makes that an error). ``VLREG_LOAD_PLUGINS`` (a comma-
separated allowlist of entry-point names; empty loads none) and
``VLREG_DISABLE_PLUGINS`` (a blocklist) choose what loads.

Every registration is validated at once: a hook implementation whose name or
arguments match no hookspec fails (pluggy's ``check_pending``), a plugin written for
another plugin API is refused, and a claim another plugin already holds fails, naming
both, unless one of the two claims says it overrides the other plugin.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from typing import Any

import pluggy

from . import hookspecs
from .parts import Claim

ENTRY_POINT_GROUP = hookspecs.PROJECT

_manager: pluggy.PluginManager | None = None
#: (kind, model_type) -> (the plugin serving it, its claim)
_claims: dict[tuple[str, str], tuple[Any, Claim]] = {}
#: id(plugin) -> the distribution that installed it (None for one registered by hand)
_distributions: dict[int, importlib.metadata.Distribution | None] = {}
#: registered plugins in registration order, which is the order claims are settled in
_registered: list[Any] = []
#: entry-point name -> why it is not loaded (disabled, not allowed, or the error)
skipped: dict[str, str] = {}


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


def _load_entry_points() -> None:
    allowed, disabled = _names("VLREG_LOAD_PLUGINS"), _names("VLREG_DISABLE_PLUGINS") or set()
    failures = []
    for entry_point in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        where = f"{entry_point.name!r} ({_dist_name(entry_point.dist)})"
        if entry_point.name in disabled:
            skipped[entry_point.name] = "disabled by VLREG_DISABLE_PLUGINS"
            continue
        if allowed is not None and entry_point.name not in allowed:
            skipped[entry_point.name] = "not in VLREG_LOAD_PLUGINS"
            continue
        try:
            register(entry_point.load(), name=entry_point.name, distribution=entry_point.dist)
        except Exception as error:  # one broken plugin must not take the others down
            if os.environ.get("VLREG_STRICT_PLUGINS") == "1":
                raise RuntimeError(f"vlreg plugin {where} failed to load: {error}") from error
            skipped[entry_point.name] = f"failed: {type(error).__name__}: {error}"
            failures.append(f"{where}: {type(error).__name__}: {error}")
    if failures:
        warnings.warn(
            "vlreg skipped plugins that failed to load (set VLREG_STRICT_PLUGINS=1 to make this "
            "an error): " + "; ".join(failures),
            stacklevel=3,
        )


def register(plugin: Any, name: str | None = None, distribution: Any = None) -> str:
    """Register ``plugin`` (a module or object with hook implementations).

    Raises if a hook implementation matches no hookspec, if the plugin was written
    for another plugin API, or if it claims a part another plugin already serves and
    neither claim overrides the other; the plugin is then not registered.
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
        _check_api(plugin, name)
        taken = _take_claims(plugin, name)
    except Exception:
        manager.unregister(plugin)
        _distributions.pop(id(plugin), None)
        raise
    _claims.update(taken)
    _registered.append(plugin)
    return name


def _check_api(plugin: Any, name: str) -> None:
    wanted = call(plugin, "vlreg_plugin_api")
    if wanted is not None and wanted != hookspecs.PLUGIN_API:
        raise ValueError(
            f"{describe(plugin, name)} was written for vlreg plugin API {wanted}, and this "
            f"vlreg provides plugin API {hookspecs.PLUGIN_API}: install a vlreg that provides "
            f"API {wanted}, or a release of the plugin written for API {hookspecs.PLUGIN_API}."
        )


def _take_claims(plugin: Any, name: str) -> dict:
    taken = {}
    for claim in call(plugin, "vlreg_claims") or []:
        claim = claim if isinstance(claim, Claim) else Claim(*claim)
        key = (claim.kind, claim.model_type)
        held = _claims.get(key)
        if held is None or held[0] is plugin or claim.overrides == _name(held[0]):
            taken[key] = (plugin, claim)
        elif held[1].overrides == name:
            continue  # the holder replaces this plugin here
        else:
            raise ValueError(
                f"{describe(plugin, name)} claims the {claim.kind} part {claim.model_type!r}, which "
                f"{describe(held[0])} already serves: uninstall one of them, or have one claim "
                f"it with overrides=<the other plugin's name>."
            )
    return taken


def unregister(plugin: Any) -> None:
    """Take ``plugin`` out of the host; a part it served by overriding another plugin
    goes back to that plugin."""
    manager = plugin_manager()
    names = {id(p): manager.get_name(p) for p in manager.get_plugins()}
    manager.unregister(plugin)
    _distributions.pop(id(plugin), None)
    _claims.clear()
    for other in _registered:
        if other is not plugin:
            _claims.update(_take_claims(other, names[id(other)]))
    _registered.remove(plugin)


def call(plugin: Any, hook: str, **kwargs: Any) -> Any:
    """Call ``hook`` on ``plugin`` alone: what it contributes, or ``None``.

    Parts are served by the plugin that claimed them, so the host never asks the
    other plugins, whatever they implement.
    """
    manager = plugin_manager()
    others = [p for p in manager.get_plugins() if p is not plugin]
    result = manager.subset_hook_caller(hook, remove_plugins=others)(**kwargs)
    if isinstance(result, list):  # a hook that is not firstresult
        return result[0] if result else None
    return result


def claimant(kind: str, model_type: str) -> Any | None:
    """The plugin that serves this part, or ``None``."""
    plugin_manager()
    held = _claims.get((kind, model_type))
    return held[0] if held else None


def claims() -> dict[tuple[str, str], Any]:
    """Every part served: ``{(kind, model_type): plugin}``."""
    plugin_manager()
    return {key: plugin for key, (plugin, _) in _claims.items()}


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
