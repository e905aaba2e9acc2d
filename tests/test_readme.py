"""The README's Python blocks run as written, in order in one session (as a reader runs
them in a notebook): each block may use what the blocks above it made, and nothing else;
the first runs in an empty namespace. Each prints what the README shows after it (the
```text block that follows; a block without one prints nothing: tests/doc_blocks.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import blocks, mismatches, run  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = blocks(README.read_text())

#: The session the blocks run in, and what each block that has run in it printed.
SESSION: dict = {}
PRINTED: list[str] = []


def run_through(index):
    """Run the blocks before ``index`` that have not run yet, then block ``index``."""
    while len(PRINTED) <= index:
        PRINTED.append(run(BLOCKS[len(PRINTED)], SESSION, "README"))


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs_and_prints_what_the_readme_shows(index):
    run_through(index)
    wrong = mismatches([BLOCKS[index]], [PRINTED[index]])
    assert not wrong, wrong[0]
