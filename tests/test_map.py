"""tests/README.md, the map from modules to their tests, stays true: every test file of the
repository is named on it, and every path it names exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = (ROOT / "tests" / "README.md").read_text()
FAMILY_FILES = {"test_conformance.py", "test_geometry.py", "test_published_widths.py"}


def named_paths():
    return {p for p in re.findall(r"`([\w./-]+)`", MAP) if "/" in p and "<" not in p}


def test_every_named_path_exists():
    missing = sorted(p for p in named_paths() if not (ROOT / p).exists())
    assert not missing, f"tests/README.md names paths that do not exist: {missing}"


def test_every_test_file_of_tests_is_on_the_map():
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    missing = sorted(files - named_paths())
    assert not missing, f"add these to tests/README.md: {missing}"


def test_every_conformance_mixin_is_on_the_map():
    from vlreg.testing import conformance

    missing = [name for name in conformance.__all__
               if name[0].isupper() and f"`{name}`" not in MAP]
    assert not missing, f"add these mixins to tests/README.md: {missing}"
