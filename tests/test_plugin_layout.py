"""Every plugin of the repository is one declaration, laid out the same way.

A newcomer who has read one plugin can read them all: each registers a `vlreg.plugin.Plugin`
(its entry point names the object, ``vlreg_<name>:plugin``), its modules are named from one
short list, and its tests from another.
"""

import importlib
import sys
import tomllib
from pathlib import Path

import pytest

from vlreg.plugin import Plugin

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(path.parent for path in [*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")])
#: A plugin's modules: the declaration, then what each kind of part needs beyond a line of it.
MODULES = {"__init__", "wrappers", "text", "vision", "geometry", "checkpoints"}
#: A plugin's tests, beside ``test_<folder>.py`` and ``test_<model type it serves>.py``.
TESTS = {"test_conformance", "test_geometry", "test_published_widths", "test_real_geometry"}


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def declaration(folder: Path):
    """The object the plugin's entry point names (an example is installed only by its own test)."""
    (target,) = project(folder)["entry-points"]["vlreg"].values()
    module, _, attribute = target.partition(":")
    sys.path.insert(0, str(folder))
    try:
        return target, getattr(importlib.import_module(module), attribute)
    finally:
        sys.path.remove(str(folder))


def served_types(folder: Path) -> set[str]:
    return {claim.model_type for claim in declaration(folder)[1].vlreg_claims()}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_the_plugin_registers_one_declaration(folder):
    assert list(project(folder)["entry-points"]) == ["vlreg"], f"{folder.name} registers more than its plugin"
    target, plugin = declaration(folder)
    assert target.endswith(":plugin"), f"{folder.name}'s entry point names {target!r}, not the declaration ':plugin'"
    assert isinstance(plugin, Plugin)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_the_plugin_modules_have_the_shared_names(folder):
    (package,) = [path for path in folder.glob("vlreg_*") if path.is_dir() and not path.name.endswith(".egg-info")]
    names = {path.stem for path in package.glob("*.py")}
    assert names <= MODULES, f"{package.relative_to(ROOT)} has modules {sorted(names - MODULES)}: name them from {sorted(MODULES)}"
    assert not [path for path in package.iterdir() if path.is_dir() and path.name != "__pycache__"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_the_plugin_tests_have_the_shared_names(folder):
    allowed = TESTS | {f"test_{folder.name}"} | {f"test_{model_type.replace('-', '_')}" for model_type in served_types(folder)}
    names = {path.stem for path in (folder / "tests").glob("test_*.py")}
    assert "test_conformance" in names, f"{folder.name} has no conformance test"
    assert names <= allowed, f"{folder.name}'s tests {sorted(names - allowed)}: name them from {sorted(allowed)}"
