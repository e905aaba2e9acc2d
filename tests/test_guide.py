"""docs/seeing-into-the-image.md: its Python blocks run in order, as written, and the
pictures it shows are in docs/images."""

import linecache
import re
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE = (DOCS / "seeing-into-the-image.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE, re.S)


def test_the_guides_blocks_run_and_draw_its_pictures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for index, block in enumerate(BLOCKS):
        name = f"<guide block {index}>"
        linecache.cache[name] = (len(block), None, block.splitlines(keepends=True), name)  # nnsight reads a trace's source
        exec(compile(block, name, "exec"), namespace)
    shown = re.findall(r"\]\(images/([\w.-]+\.png)\)", GUIDE)
    assert shown and sorted(path.name for path in tmp_path.glob("*.png")) == sorted(shown)
    for picture in shown:
        with Image.open(DOCS / "images" / picture) as committed, Image.open(tmp_path / picture) as drawn:
            assert committed.format == "PNG" and committed.size == drawn.size
