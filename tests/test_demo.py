"""``vlreg demo`` (``make demo``): on the shipped toy model, with an empty cache, it trains
nothing, prints the same output on every run (a fresh process and this one), and draws
docs/images' pictures pixel for pixel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vlreg.cli import main
from vlreg.demo import demo_scene

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import IMAGES, different  # noqa: E402

pytestmark = pytest.mark.heavy  # the demo, in a process and here: started first under make test

PICTURES = ["occlusion.png", "logit-lens.png", "patching.png", "attention.png", "tower.png", "dictionary.png",
            "video-occlusion.png", "video-frames.png"]


def test_the_demo_prints_the_same_twice_draws_the_docs_pictures_and_caches_nothing(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    environment = {**os.environ, "VLREG_CACHE": str(cache)}
    fresh = subprocess.run([sys.executable, "-m", "vlreg", "demo", "--out", str(tmp_path / "a")], env=environment,
                           capture_output=True, text=True, timeout=900)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    monkeypatch.setenv("VLREG_CACHE", str(cache))
    assert main(["demo", "--out", str(tmp_path / "b")]) == 0
    again = capsys.readouterr()
    assert fresh.stdout.replace(str(tmp_path / "a"), "OUT") == again.out.replace(str(tmp_path / "b"), "OUT")
    assert fresh.stderr == again.err and "... occlusion" in again.err   # progress, the same lines
    assert not cache.exists()   # nothing trained, nothing cached
    example = demo_scene()
    said = again.out
    assert f"answer: {example.answer!r}" in said and f"on the {example.shape}" in said
    assert f"dictionary on layers[0].layer_output (128 features): the most active at the {example.shape}'s token" in said
    assert sorted(path.name for path in (tmp_path / "b").glob("*.png")) == sorted(PICTURES)
    for name in PICTURES:
        for run in "ab":
            assert not different(IMAGES / name, tmp_path / run / name), different(IMAGES / name, tmp_path / run / name)

