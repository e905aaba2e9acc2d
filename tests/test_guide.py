"""docs/seeing-into-the-image.md: its Python blocks run in order, as written, each prints
what the guide shows after it (tests/doc_blocks.py), and the pictures they draw are the
ones docs/images holds and the guide shows, pixel for pixel."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, different, run_page  # noqa: E402

PAGE = IMAGES.parent / "seeing-into-the-image.md"


def test_the_guides_blocks_print_what_it_shows_and_draw_its_pictures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLREG_CACHE", str(tmp_path / "cache"))
    wrong = run_page(PAGE)
    assert not wrong, "\n".join(wrong)
    shown = re.findall(r"\]\(images/([\w.-]+\.png)\)", PAGE.read_text())
    assert shown and sorted(path.name for path in tmp_path.glob("*.png")) == sorted(shown)
    for picture in shown:
        assert not different(IMAGES / picture, tmp_path / picture), different(IMAGES / picture, tmp_path / picture)
    assert not (tmp_path / "cache").exists()   # the shipped toy and dictionary: nothing trained
