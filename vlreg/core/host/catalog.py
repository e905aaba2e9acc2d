"""What the plugins declare they serve, read without importing them, and the catalog of
the repository's own plugins for a user who has not installed one.

A plugin's distribution declares its claims and adapters in its entry-point metadata,
beside the ``vlreg`` entry point that registers it::

    [project.entry-points."vlreg.claims"]
    "wrapper:llama4" = "vlreg_llama4:plugin"        # kind:model_type = what the vlreg entry point names
    [project.entry-points."vlreg.adapters"]
    qwen_vit = "vlreg_qwen2_vl:plugin"
    [project.entry-points."vlreg.refuses"]
    "wrapper:glm4v:videos" = "vlreg_glm4v:plugin"   # kind:model_type:name of a Claim.refuses entry

so the host can name a plugin that is installed but not loaded (disabled, or left out of
``VLREG_LOAD_PLUGINS``) by what it would serve, without running its code. The metadata
repeats the plugin's ``vlreg_claims`` and ``vlreg_adapters``, and the names its claims
refuse (`Claim.refuses`: the type is served partially; the reasons are the claims' own,
sentences that entry-point names cannot hold); the host warns when a loaded plugin's hooks
and its metadata disagree.

A plugin that is not installed cannot be asked. The repository's plugins are in
``catalog.json``, generated from their ``pyproject.toml`` files (``make catalog``) and
kept equal to them by ``tests/test_catalog.py``. A third-party family cannot be
suggested before it is installed.
"""

from __future__ import annotations

import json
import sys
import tomllib
from functools import cache
from pathlib import Path

from .hookspecs import PROJECT
from .parts import is_kind

CLAIMS = f"{PROJECT}.claims"
ADAPTERS = f"{PROJECT}.adapters"
REFUSES = f"{PROJECT}.refuses"
FILE = Path(__file__).with_name("catalog.json")


def parse_claim(name: str) -> tuple[str, str] | None:
    """``"wrapper:llama4"`` -> ``("wrapper", "llama4")``; ``None`` if it is not a claim."""
    kind, _, model_type = name.partition(":")
    return (kind, model_type) if is_kind(kind) and model_type else None


def parse_refusal(name: str) -> tuple[str, str, str] | None:
    """``"wrapper:glm4v:videos"`` -> ``("wrapper", "glm4v", "videos")``; ``None`` if it is not one."""
    claim, _, refused = name.rpartition(":")
    parsed = parse_claim(claim)
    return (*parsed, refused) if parsed and refused else None


def declared(entry_point) -> dict[str, set] | None:
    """What the distribution of ``entry_point`` (a ``vlreg`` entry point) declares its
    plugin serves: ``{"claims": {(kind, model_type)}, "adapters": {name}, "refuses":
    {(kind, model_type, name)}}``, from the
    metadata entries whose value is the plugin's module; ``None`` where the distribution
    declares nothing (the plugin must be asked)."""
    dist = entry_point.dist
    if dist is None:
        return None
    entries = [ep for ep in dist.entry_points if ep.group in (CLAIMS, ADAPTERS, REFUSES)]
    if not entries:
        return None
    mine = [ep for ep in entries if ep.value.strip() == entry_point.value.strip()]
    claims = {parse_claim(ep.name) for ep in mine if ep.group == CLAIMS}
    refuses = {parse_refusal(ep.name) for ep in mine if ep.group == REFUSES}
    return {"claims": claims - {None}, "adapters": {ep.name for ep in mine if ep.group == ADAPTERS},
            "refuses": refuses - {None}}


@cache
def load() -> dict[str, dict]:
    """The repository's plugins: ``{distribution: {"folder", "claims", "adapters", "refuses"}}``."""
    return json.loads(FILE.read_text())


def serving(kind: str, model_type: str) -> list[tuple[str, str]]:
    """The repository's distributions serving the part, with their folders."""
    return [(dist, entry["folder"]) for dist, entry in load().items() if f"{kind}:{model_type}" in entry["claims"]]


def publishing(adapter: str) -> list[tuple[str, str]]:
    """The repository's distributions publishing the adapter, with their folders."""
    return [(dist, entry["folder"]) for dist, entry in load().items() if adapter in entry["adapters"]]


def generate(repository: Path) -> dict[str, dict]:
    """The catalog, read off ``repository``'s ``plugins/*/pyproject.toml``."""
    found = {}
    for path in sorted(Path(repository).glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(path.read_text())["project"]
        groups = project.get("entry-points", {})
        found[project["name"]] = {
            "folder": path.parent.relative_to(repository).as_posix(),
            "claims": sorted(groups.get(CLAIMS, {})),
            "adapters": sorted(groups.get(ADAPTERS, {})),
            "refuses": sorted(groups.get(REFUSES, {})),
        }
    return found


if __name__ == "__main__":  # make catalog: rewrite catalog.json from the repository
    FILE.write_text(json.dumps(generate(Path(sys.argv[1] if len(sys.argv) > 1 else ".")), indent=1) + "\n")
