"""The README's Python blocks run as written."""

import linecache
import re
from pathlib import Path

import pytest
from PIL import Image

from vlreg.testing import build

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    from transformers import AutoProcessor

    checkpoint = str(build("qwen2_vl"))
    prompt = AutoProcessor.from_pretrained(checkpoint).apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    namespace = {"checkpoint": checkpoint, "prompt": prompt, "image": Image.new("RGB", (112, 84), "blue")}
    name = f"<README block {BLOCKS.index(block)}>"
    linecache.cache[name] = (len(block), None, block.splitlines(keepends=True), name)  # nnsight reads a trace's source
    exec(compile(block, name, "exec"), namespace)
