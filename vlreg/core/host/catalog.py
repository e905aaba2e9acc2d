"""The repository's plugins, for a user who has not installed one: what each distribution
claims and publishes, and its folder, in ``catalog.json``.

The catalog is generated from the plugins' own declarations (``make catalog`` imports each
and asks it), and ``tests/test_catalog.py`` fails where it drifts from them: the claims are
stated once, in each `Plugin`. A third-party family cannot be suggested before it is
installed; one installed but held back is asked itself (`plugins.not_loaded_serving`).
"""

from __future__ import annotations

import importlib
import json
import sys
import tomllib
from functools import cache
from pathlib import Path

FILE = Path(__file__).with_name("catalog.json")


@cache
def load() -> dict[str, dict]:
    """``{distribution: {"folder", "claims": ["kind:model_type"], "adapters": [name]}}``."""
    return json.loads(FILE.read_text())


def serving(kind: str, model_type: str) -> list[tuple[str, str]]:
    """The repository's distributions serving the part, with their folders."""
    return [(dist, entry["folder"]) for dist, entry in load().items() if f"{kind}:{model_type}" in entry["claims"]]


def publishing(adapter: str) -> list[tuple[str, str]]:
    """The repository's distributions publishing the adapter, with their folders."""
    return [(dist, entry["folder"]) for dist, entry in load().items() if adapter in entry["adapters"]]


def generate(repository: Path) -> dict[str, dict]:
    """The catalog, asked of the plugins ``repository/plugins/*/pyproject.toml`` register
    (each must be importable: ``make install`` installs them)."""
    from .plugins import ask, claims_of

    found = {}
    for path in sorted(Path(repository).glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(path.read_text())["project"]
        (target,) = project["entry-points"]["vlreg"].values()
        module, _, attribute = target.partition(":")
        plugin = getattr(importlib.import_module(module), attribute)
        found[project["name"]] = {
            "folder": path.parent.relative_to(repository).as_posix(),
            "claims": sorted({f"{claim.kind}:{claim.model_type}" for claim in claims_of(plugin)}),
            "adapters": sorted(ask(plugin, "vlreg_adapters") or {}),
        }
    return found


def dumps(catalog: dict[str, dict]) -> str:
    """The catalog's text: a distribution a line."""
    return "{\n" + ",\n".join(f" {json.dumps(dist)}: {json.dumps(entry)}" for dist, entry in catalog.items()) + "\n}\n"


if __name__ == "__main__":  # make catalog: rewrite catalog.json from the repository's plugins
    FILE.write_text(dumps(generate(Path(sys.argv[1] if len(sys.argv) > 1 else "."))))
