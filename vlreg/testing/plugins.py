"""Registering a plugin for the length of a test."""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from ..core.host import plugins


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
