"""``make bench`` still runs: a smoke run at tiny size (no timing is asserted)."""

import json
import subprocess

import pytest
import sys
from pathlib import Path

pytestmark = pytest.mark.heavy  # the benchmark script, which starts a dozen processes: started first under make test

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def test_the_benchmark_script_runs_and_reports_every_row(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    workloads = [row["workload"] for row in results["geometries"]["tiny"]["workloads"]]
    assert workloads == ["logits", "all blocks + logits", "image_features + edit", "attention pattern (eager)"]
    for row in results["geometries"]["tiny"]["workloads"]:
        assert row["vlreg / nnsight"] > 0 and row["vlreg / transformers"] > 0
    assert set(results["startup"]) == {"import nnsight + transformers (s)", "import vlreg + plugins (s)",
                                       "build nnsight, meta (s)", "build vlreg, meta (s)"}
    assert set(results["memory"]["tiny"]) == {"transformers", "nnsight", "vlreg"}
    for workload in workloads:
        assert f"| tiny | {workload} |" in done.stdout
    assert "import:" in done.stdout and "build on meta" in done.stdout and "peak memory" in done.stdout
    study = results["studies"]["tiny"]
    for measured in ("occlusion, vlreg (tower once)", "occlusion, tower every batch", "occlusion, floor (transformers)",
                     "everything, vlreg", "everything, hooks"):
        assert study[measured] > 0, measured
    assert study["occlusion / floor"] > 0 and study["everything / hooks"] > 0
    assert set(results["everything memory"]["tiny"]) == {"transformers", "vlreg"}
    assert "occlusion sweep over every image token (tiny)" in done.stdout and "cache everything (tiny)" in done.stdout
    assert results["demo"]["wall (s)"] > 0 and results["demo"]["cpu (s)"] > 0 and "make demo (vlreg demo" in done.stdout


def test_a_gpu_run_says_plainly_when_there_is_no_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present here: the message for a machine without one does not apply")
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--device", "cuda", "--dtype", "bfloat16",
                           "--out", str(tmp_path / "gpu.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "no CUDA device on this machine" in done.stdout
    assert not (tmp_path / "gpu.json").exists()
