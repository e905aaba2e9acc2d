"""README's Compatibility table is the truth about the transformers releases vlreg supports:
the requirement in pyproject.toml spans exactly its rows, and on the release installed the
row's count of image-text-to-text types and the types it adds are what transformers maps,
and each is as the row says: not served yet, served, or refused by name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import transformers
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def rows() -> dict[Version, tuple[int, list[str], str]]:
    """``{release: (types, the types it adds, what it says of them)}`` from README's table."""
    section = (ROOT / "README.md").read_text().split("### Compatibility", 1)[1].split("\n### ", 1)[0]
    found = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"\d+\.\d+\.\d+", cells[0]):
            found[Version(cells[0])] = (int(cells[2]), re.findall(r"`([a-z0-9_]+)`", cells[3]), cells[3])
    return found


def requirement() -> str:
    """pyproject.toml's requirement on transformers, as written."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(d for d in dependencies if Requirement(d).name == "transformers")


def test_the_requirement_spans_the_tables_releases():
    table, allowed = rows(), Requirement(requirement()).specifier
    assert table, "README's Compatibility section has no table of releases"
    assert all(allowed.contains(release) for release in table)
    floor, newest = min(table), max(table)
    assert not allowed.contains(Version(f"{floor.major}.{floor.minor - 1}.0")), "the floor is the oldest row"
    assert not allowed.contains(Version(f"{newest.major}.{newest.minor + 1}.0")), "nothing past the newest row"
    assert f"`{requirement()}`" in (ROOT / "README.md").read_text(), "the text above the table names the requirement"


def test_the_installed_release_is_a_row_and_its_types_are_as_the_row_says():
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES as types

    from vlreg.cli import coverage, refused

    installed = Version(transformers.__version__)
    table = rows()
    assert installed in table, f"transformers {installed} is installed, and README's table does not list it"
    count, _, _ = table[installed]
    assert len(types) == count
    served, declined = coverage(), refused()
    for release, (_, added, says) in table.items():
        if release > installed:
            assert not set(added) & set(types), f"{release} adds types this older release already has"
            continue
        assert set(added) <= set(types), f"{release}'s new types {added} are not in transformers {installed}"
        for clause in says.split(";"):  # "`a`, `b`: not served yet; `c`: served (...); `d`: refused by name (...)"
            named = re.findall(r"`([a-z0-9_]+)`", clause)
            if "not served" in clause:
                assert all(served[model_type] is None and model_type not in declined for model_type in named), clause
            elif "refused by name" in clause:
                assert all(model_type in declined for model_type in named), clause
            elif "served" in clause:
                assert all(served[model_type] is not None for model_type in named), clause
