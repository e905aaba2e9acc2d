"""The README's Python blocks run as written, in order in one session (as a reader runs
them in a notebook): each block may use what the blocks above it made, and nothing else;
the first runs in an empty namespace."""

import linecache
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)

#: The session the blocks run in, and how many of them have run in it.
SESSION: dict = {}
RAN: list[int] = []


def run_through(index):
    """Run the blocks before ``index`` that have not run yet, then block ``index``."""
    while len(RAN) <= index:
        number = len(RAN)
        block = BLOCKS[number]
        name = f"<README block {number}>"
        linecache.cache[name] = (len(block), None, block.splitlines(keepends=True), name)  # nnsight reads a trace's source
        exec(compile(block, name, "exec"), SESSION)
        RAN.append(number)


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(index):
    run_through(index)

