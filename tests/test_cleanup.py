"""Tests and tools leave nothing behind: what `vlreg.testing.build` writes without a path
goes when the process exits (real geometries run to gigabytes), or sooner with `forget`."""

import subprocess
import sys
from pathlib import Path

from vlreg.testing import build, forget

BUILD = "from vlreg.testing import build; print(build('qwen2_vl'))"


def test_a_built_checkpoint_is_removed_when_the_process_exits():
    done = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, timeout=300, check=True)
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("vlreg-qwen2_vl-")
    assert not folder.exists()


def test_forget_removes_it_now_and_the_next_build_writes_it_again():
    folder = build("qwen2_vl", text_config={"num_hidden_layers": 1})
    assert (folder / "config.json").is_file()
    forget(folder)
    assert not folder.exists()
    again = build("qwen2_vl", text_config={"num_hidden_layers": 1})
    assert again != folder and (again / "config.json").is_file()
    forget(again)
