"""docs/videos.md: its Python blocks run in order, as written, on tiny checkpoints built on
disk, and each prints what the page shows after it (tests/doc_blocks.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, run_page  # noqa: E402


def test_the_videos_pages_blocks_print_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wrong = run_page(IMAGES.parent / "videos.md")
    assert not wrong, "\n".join(wrong)
