"""The plugin host: one pluggy manager, built-in and third-party plugins alike.

Plugins are found through the ``vlreg`` entry-point group, the built-in families
included (each is its own distribution under ``plugins/``), so a family written
outside this repository registers exactly as the built-in ones do. Tests register
a plugin object directly with `register` and take it away with `unregister`.

Every registration is validated at once: a hook implementation whose name or
arguments match no hookspec fails (pluggy's ``check_pending``), and a claim another
plugin already holds fails, naming both.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Any

import pluggy

from . import hookspecs
from .parts import Claim

ENTRY_POINT_GROUP = hookspecs.PROJECT

_manager: pluggy.PluginManager | None = None
#: (kind, model_type) -> the plugin that claimed it
_claims: dict[tuple[str, str], Any] = {}
#: plugin -> the distribution that installed it (None for one registered by hand)
_distributions: dict[int, importlib.metadata.Distribution | None] = {}


def plugin_manager() -> pluggy.PluginManager:
    """The process's plugin manager, loading the installed plugins on first use."""
    global _manager
    if _manager is None:
        _manager = pluggy.PluginManager(hookspecs.PROJECT)
        _manager.add_hookspecs(hookspecs)
        for entry_point in sorted(
            importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name
        ):
            try:
                plugin = entry_point.load()
                register(plugin, name=entry_point.name, distribution=entry_point.dist)
            except Exception as error:  # one broken plugin must not take the others down
                warnings.warn(
                    f"vlreg plugin {entry_point.name!r} "
                    f"(from {_dist_name(entry_point.dist)}) failed to load and is skipped: "
                    f"{type(error).__name__}: {error}",
                    stacklevel=2,
                )
    return _manager


def register(plugin: Any, name: str | None = None, distribution: Any = None) -> str:
    """Register ``plugin`` (a module or object with hook implementations).

    Raises if a hook implementation matches no hookspec, or if the plugin claims a
    part another plugin already claims; the plugin is then not registered.
    """
    manager = plugin_manager()
    name = manager.register(plugin, name=name)
    _distributions[id(plugin)] = distribution
    try:
        manager.check_pending()
        claims = [Claim(*c) if isinstance(c, tuple) else c for c in call(plugin, "vlreg_claims") or []]
        for claim in claims:
            holder = _claims.get((claim.kind, claim.model_type))
            if holder is not None and holder is not plugin:
                raise ValueError(
                    f"{describe(plugin, name)} claims the {claim.kind} part {claim.model_type!r}, "
                    f"which {describe(holder)} already serves; uninstall one of them."
                )
    except Exception:
        manager.unregister(plugin)
        _distributions.pop(id(plugin), None)
        raise
    for claim in claims:
        _claims[(claim.kind, claim.model_type)] = plugin
    return name


def unregister(plugin: Any) -> None:
    """Take ``plugin`` and its claims out of the host."""
    plugin_manager().unregister(plugin)
    for key in [key for key, holder in _claims.items() if holder is plugin]:
        del _claims[key]
    _distributions.pop(id(plugin), None)


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
    """The plugin that claimed this part, or ``None``."""
    plugin_manager()
    return _claims.get((kind, model_type))


def claims() -> dict[tuple[str, str], Any]:
    """Every claim of every registered plugin: ``{(kind, model_type): plugin}``."""
    plugin_manager()
    return dict(_claims)


def distribution(plugin: Any) -> importlib.metadata.Distribution | None:
    """The distribution that installed ``plugin`` (``None`` if registered by hand)."""
    return _distributions.get(id(plugin))


def describe(plugin: Any, name: str | None = None) -> str:
    """A plugin as a person reads it: its name and the distribution it came from."""
    name = name or plugin_manager().get_name(plugin)
    dist = _distributions.get(id(plugin))
    return f"plugin {name!r} ({_dist_name(dist)})"


def _dist_name(dist: Any) -> str:
    if dist is None:
        return "registered by hand"
    return f"{dist.name} {dist.version}"
