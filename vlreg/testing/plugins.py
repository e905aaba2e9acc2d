"""Registering a plugin for the length of a test, and a plugin of hooks written by hand to
register there."""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from ..core.host import plugins
from ..core.host.hookspecs import hookimpl


@contextlib.contextmanager
def registered(plugin: Any = None, *, name: str | None = None, replacing: Iterable[Any] = ()) -> Iterator[Any]:
    """Register ``plugin`` by hand (not through an entry point) while the block runs,
    with the plugins in ``replacing`` taken out; everything is put back afterwards,
    the replaced plugins under their own names and distributions."""
    replaced = [(p, plugins.plugin_manager().get_name(p), plugins.distribution(p)) for p in replacing]
    for p, _, _ in replaced:
        plugins.unregister(p)
    try:
        if plugin is not None:
            plugins.register(plugin, name=name)
        try:
            yield plugin
        finally:
            if plugin is not None:
                plugins.unregister(plugin)
    finally:
        for p, p_name, dist in replaced:
            plugins.register(p, name=p_name, distribution=dist)


class Forwarding:
    """A plugin of hook methods written by hand, as a third party may write one, serving
    what ``plugin`` serves: it answers `vlreg_claims`, `vlreg_rename`, `vlreg_envoys` and
    `vlreg_entry` as ``plugin`` does. A test subclasses it and changes one hook (a method of
    the same name, itself a ``hookimpl``); registered, it stands in for ``plugin``."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin

    @hookimpl
    def vlreg_claims(self) -> Any:
        return self.plugin.vlreg_claims()

    @hookimpl
    def vlreg_rename(self, part: Any) -> Any:
        return self.plugin.vlreg_rename(part)

    @hookimpl
    def vlreg_envoys(self, part: Any) -> Any:
        return self.plugin.vlreg_envoys(part)

    @hookimpl
    def vlreg_entry(self, part: Any) -> Any:
        return self.plugin.vlreg_entry(part)
