"""docs/gradients.md: its Python blocks run in order, as written, on the shipped toy, and
each prints what the page shows after it (tests/doc_blocks.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, blocks, mismatches, run  # noqa: E402

PAGE = (IMAGES.parent / "gradients.md").read_text()


def test_the_gradients_pages_blocks_print_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLREG_CACHE", str(tmp_path / "cache"))
    found = blocks(PAGE)
    namespace: dict = {}
    printed = [run(block, namespace, "gradients") for block in found]
    wrong = mismatches(found, printed)
    assert not wrong, "\n".join(wrong) + "\n(python tests/doc_blocks.py docs/gradients.md rewrites them)"
    assert not (tmp_path / "cache").exists()  # the shipped toy: nothing trained
