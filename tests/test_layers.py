"""vlreg's modules import each other in layers, arrows pointing down only.

The core is five layers, each a package: ``serving`` (how a value is served), ``envoys``
(the standard envoy classes), ``images`` (where images meet the text model), ``host``
(the plugins), then the model and what runs it (the modules directly in ``vlreg/core``).
A module imports only from its own layer or the ones below (``errors`` is below all), and
no two modules anywhere in ``vlreg/`` import each other in a circle, at module level or
inside a function. Where an envoy needs something of a higher layer (the geometry, the
family's entry), it asks the model it is part of.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "vlreg"
LAYERS = ("core.errors", "core.serving", "core.envoys", "core.images", "core.host", "core")


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict) -> dict[str, int]:
    """The modules of vlreg ``name`` imports anywhere in it (a function's imports, and
    ``TYPE_CHECKING`` ones, too), with the line of the first."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if target in known and target != name:
                found.setdefault(target, node.lineno)
    return found


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def layer(name: str) -> int | None:
    """The core layer ``name`` is in (``None`` outside the core)."""
    if not name.startswith("vlreg.core"):
        return None
    inner = name.removeprefix("vlreg.")
    for depth, prefix in enumerate(LAYERS):
        if inner == prefix or inner.startswith(prefix + ".") and prefix != "core":
            return depth
    return len(LAYERS) - 1


def test_no_module_of_vlreg_imports_another_in_a_circle():
    found = circles(graph())
    assert not found, f"modules importing each other in a circle: {found}"


def test_the_core_imports_downwards_only():
    upward = [
        f"{name} (line {line}) imports {target}"
        for name, targets in graph().items() if layer(name) is not None
        for target, line in targets.items()
        if layer(target) is not None and layer(target) > layer(name)
    ]
    assert not upward, "a core module imports from a layer above its own:\n" + "\n".join(upward)


@pytest.mark.parametrize("name", ["vlreg.core.envoys.standard", "vlreg.core.images.entries", "vlreg.core.host.family"])
def test_the_layers_are_what_the_layout_says(name):
    assert layer(name) == {"envoys": 2, "images": 3, "host": 4}[name.split(".")[2]]
    assert layer("vlreg.core.model") == len(LAYERS) - 1 and layer("vlreg.core.errors") == 0


def test_the_checks_see_a_circle_and_an_upward_import():
    edges = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert circles(edges) == [["a", "b", "c"]]
    assert layer("vlreg.core.serving.values") < layer("vlreg.core.envoys.text") < layer("vlreg.core.model")


def type_name_checks(path: Path) -> list[int]:
    """Lines that compare a class's name with a string (``type(x).__name__ == "..."``),
    which dodge an import and break silently when a class is renamed. (The survey of an
    unknown model reads hints off transformers' class names, ``"PatchEmbed" in ...``: a
    heuristic over classes vlreg does not own, not a check of its own.)"""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare) or not all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            continue
        sides = [node.left, *node.comparators]
        named = any(isinstance(side, ast.Attribute) and side.attr == "__name__" for side in sides)
        literal = any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in sides)
        if named and literal:
            lines.append(node.lineno)
    return lines


def test_nothing_asks_a_class_by_its_name():
    """What differs between the ways an image reaches the text model is asked of the
    family's entry (`vlreg.core.images.entries`), never read off a class's name."""
    plugins = Path(__file__).resolve().parents[1] / "plugins"
    found = {str(path): lines for path in [*ROOT.rglob("*.py"), *plugins.glob("*/vlreg_*/*.py")]
             if (lines := type_name_checks(path))}
    assert not found, f"type-name checks: {found}"
