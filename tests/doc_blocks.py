"""The docs' Python blocks, run as written, and what they print checked against the doc.

The convention, in README.md and docs/: a ```python block that prints is followed right
away (at most a blank line between) by a ```text block holding exactly what it prints;
a block with no ```text block after it prints nothing. So every figure a doc shows
after a block is one a fresh run prints, on the shipped toy model (`vlreg.testing.toy`).

After the shipped toy changes (``python -m vlreg.testing.ship``), rewrite the text
blocks from a fresh run: ``python tests/doc_blocks.py docs/seeing-into-the-image.md``
(it runs the blocks in a scratch folder, as the tests do, and copies the pictures they
draw into docs/images).
"""

from __future__ import annotations

import contextlib
import io
import linecache
import re
import sys
from pathlib import Path

from attrs import frozen

#: The docs' pictures: ``vlreg demo --out docs/images`` draws them, and so do the guide's blocks.
IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"

BLOCK = re.compile(r"```python\n(.*?)```\n(?:\n?```text\n(.*?)```\n)?", re.S)


@frozen
class Block:
    """A Python block: its ``code``, the output the doc shows (``""`` where it shows
    none), its index and where the shown output is in the doc (``shown_at``, the span
    of the text block's content, or the point after the code block where one would go;
    ``text``: whether there is a text block)."""

    code: str
    shown: str
    index: int
    shown_at: tuple[int, int]
    text: bool


def blocks(text: str) -> list[Block]:
    found = []
    for index, match in enumerate(BLOCK.finditer(text)):
        span = match.span(2) if match.group(2) is not None else (match.end(1) + 4, match.end(1) + 4)
        found.append(Block(match.group(1), match.group(2) or "", index, span, match.group(2) is not None))
    return found


def run(block: Block, namespace: dict, name: str) -> str:
    """Run one block in ``namespace`` (shared by a doc's blocks, in order); what it printed."""
    label = f"<{name} block {block.index}>"
    linecache.cache[label] = (len(block.code), None, block.code.splitlines(keepends=True), label)  # nnsight reads a trace's source
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.code, label, "exec"), namespace)
    return printed.getvalue()


#: A ```sh block: each line (a trailing backslash joins the next) a ``vlreg`` command.
SHELL = re.compile(r"```sh\n(.*?)```\n", re.S)


def in_order(text: str) -> list:
    """The doc's Python blocks (`Block`) and ```sh blocks (their text) in the order they
    appear, for a doc whose commands and code build on each other."""
    found = [(match.start(), block) for match, block in zip(BLOCK.finditer(text), blocks(text))]
    found += [(match.start(), match.group(1)) for match in SHELL.finditer(text)]
    return [block for _, block in sorted(found, key=lambda pair: pair[0])]


def run_shell(code: str) -> None:
    """A ```sh block's ``vlreg`` commands, each run in this process by `vlreg.cli.main`
    (what the ``vlreg`` command calls), so a doc's commands share the suite's imports;
    a command that fails fails the doc. Only ``vlreg`` commands are run."""
    import shlex

    from vlreg.cli import main

    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] != "vlreg":
            raise ValueError(f"a doc's sh block runs vlreg commands only, not {line!r}")
        code_ = main(["--debug", *words[1:]])  # a failure shows its whole traceback
        if code_ != 0:
            raise RuntimeError(f"`{line}` exited with {code_}")


def run_page(page: Path) -> list[str]:
    """Run a doc's Python blocks in order, as written, in one namespace and the current
    folder: a message for each block whose output differs from what the doc shows, and a
    last line saying how to rewrite them (none where all agree)."""
    found = blocks(page.read_text())
    namespace: dict = {}
    wrong = mismatches(found, [run(block, namespace, page.stem) for block in found])
    return wrong + [f"(python tests/doc_blocks.py docs/{page.name} rewrites them)"] if wrong else []


def mismatches(found: list[Block], printed: list[str]) -> list[str]:
    """A message for each block whose output differs from what the doc shows."""
    wrong = []
    for block, out in zip(found, printed):
        if out != block.shown:
            wrong.append(f"block {block.index} (starting {block.code.splitlines()[0]!r}) printed:\n{out}"
                         f"the doc shows:\n{block.shown or '(nothing)'}\n")
    return wrong


def different(expected: Path, drawn: Path) -> str | None:
    """Why the picture ``drawn`` is not ``expected`` pixel for pixel, or None. No
    tolerance: a fresh run draws the same pixels (on one thread or two, the same bytes)."""
    import numpy as np
    from PIL import Image

    with Image.open(expected) as a, Image.open(drawn) as b:
        if a.size != b.size:
            return f"{drawn} is {b.size}, {expected} is {a.size}"
        wrong = (np.asarray(a.convert("RGB")) != np.asarray(b.convert("RGB"))).any(-1)
    if wrong.any():
        ys, xs = wrong.nonzero()
        return (f"{drawn} differs from {expected} at {int(wrong.sum())} pixels, within x {xs.min()}-{xs.max()}, "
                f"y {ys.min()}-{ys.max()}: regenerate docs/images with `vlreg demo --out docs/images` if the change is meant")
    return None


def rewrite(text: str, found: list[Block], printed: list[str]) -> str:
    """``text`` with each block's text block holding what it printed (added where a block
    prints and shows nothing, removed where it shows something and prints nothing)."""
    for block, out in sorted(zip(found, printed), key=lambda pair: -pair[0].index):
        start, end = block.shown_at
        if block.text and not out:  # drop the whole ```text block
            start, end = text.rindex("```text\n", 0, start), end + 4
            end += 1 if text[end : end + 1] == "\n" else 0
        elif not block.text and out:
            text = text[:start] + f"```text\n{out}```\n" + text[start:]
            continue
        text = text[:start] + out + text[end:]
    return text


def main(paths: list[str]) -> int:
    import os
    import shutil
    import tempfile

    for path in map(Path, paths):
        text = path.read_text()
        found = blocks(text)
        namespace: dict = {}
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as scratch:
            os.chdir(scratch)
            try:
                printed = [run(block, namespace, path.name) for block in found]
            finally:
                os.chdir(here)
            for picture in sorted(Path(scratch).glob("*.png")):
                shutil.copyfile(picture, IMAGES / picture.name)
                print(f"drew {IMAGES / picture.name}")
        new = rewrite(text, found, printed)
        path.write_text(new)
        print(f"{path}: {len(mismatches(found, printed))} of {len(found)} blocks' output rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
