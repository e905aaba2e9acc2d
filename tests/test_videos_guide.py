"""docs/videos.md: its Python blocks run in order, as written, on tiny checkpoints built on
disk (and the shipped toy), each prints what the page shows after it (tests/doc_blocks.py),
and the pictures they draw are the ones docs/images holds and the page shows, pixel for pixel."""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, different, run_page  # noqa: E402

PAGE = IMAGES.parent / "videos.md"


def test_the_videos_pages_blocks_print_what_it_shows_and_draw_its_pictures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wrong = run_page(PAGE)
    assert not wrong, "\n".join(wrong)
    shown = re.findall(r"\]\(images/([\w.-]+\.png)\)", PAGE.read_text())
    assert shown and sorted(path.name for path in tmp_path.glob("*.png")) == sorted(shown)
    for picture in shown:
        assert not different(IMAGES / picture, tmp_path / picture), different(IMAGES / picture, tmp_path / picture)
