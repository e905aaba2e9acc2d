"""``make bench`` still runs: a smoke run at tiny size (no timing is asserted), in this
process as ``python benchmarks/run.py --smoke`` runs it (`make demo` in a fresh one), and
``python benchmarks/training.py --smoke`` where sae-lens is installed."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # the benchmark script, which starts a dozen processes: started first under make test

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import run  # noqa: E402


def test_the_benchmark_script_runs_and_reports_every_row(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert run.main(["--smoke", "--out", str(out)]) == 0
    done = capsys.readouterr()
    results = json.loads(out.read_text())
    workloads = [row["workload"] for row in results["geometries"]["tiny"]["workloads"]]
    assert workloads == ["logits", "all blocks + logits", "image_features + edit", "attention pattern (eager)"]
    for row in results["geometries"]["tiny"]["workloads"]:
        assert row["vlreg / nnsight"] > 0 and row["vlreg / transformers"] > 0
    assert set(results["startup"]) == {"import nnsight + transformers (s)", "import vlreg + plugins (s)",
                                       "build nnsight, meta (s)", "build vlreg, meta (s)"}
    assert set(results["memory"]["tiny"]) == {"transformers", "nnsight", "vlreg"}
    for workload in workloads:
        assert f"| tiny | {workload} |" in done.out
    assert "import:" in done.out and "build on meta" in done.out and "peak memory" in done.out
    study = results["studies"]["tiny"]
    for measured in ("occlusion, vlreg (tower once)", "occlusion, tower every batch", "occlusion, floor (transformers)",
                     "everything, vlreg", "everything, hooks"):
        assert study[measured] > 0, measured
    assert study["occlusion / floor"] > 0 and study["everything / hooks"] > 0
    assert set(results["everything memory"]["tiny"]) == {"transformers", "vlreg"}
    assert "occlusion sweep over every image token (tiny)" in done.out and "cache everything (tiny)" in done.out
    assert results["demo"]["wall (s)"] > 0 and results["demo"]["cpu (s)"] > 0 and "make demo (vlreg demo" in done.out


def test_a_gpu_run_says_plainly_when_there_is_no_gpu(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present here: the message for a machine without one does not apply")
    assert run.main(["--smoke", "--device", "cuda", "--dtype", "bfloat16", "--out", str(tmp_path / "gpu.json")]) == 0
    assert "no CUDA device on this machine" in capsys.readouterr().out
    assert not (tmp_path / "gpu.json").exists()


@pytest.mark.skipif(importlib.util.find_spec("sae_lens") is None,
                    reason="sae-lens is not installed (pip install 'vlreg[train]'): benchmarks/training.py trains with it")
def test_the_training_benchmark_runs_and_reports_throughput_and_memory(tmp_path, capsys):
    import training

    out = tmp_path / "training.json"
    assert training.main(["--smoke", "--out", str(out)]) == 0
    done = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results["throughput"]["vlreg activations/s"] > 0 and results["throughput"]["floor activations/s"] > 0
    stores = [key for key in results["memory"] if key.startswith("store of")]
    assert len(stores) == 2 and all(results["memory"][key]["peak anonymous memory added (MiB)"] >= 0 for key in stores)
    assert results["memory"]["the trainer's own"]["peak anonymous memory added (MiB)"] >= 0
    assert {"memory, larger store over smaller (MiB)", "stream / buffer"} <= set(results["memory"])
    assert set(results["targets"]) == set(training.TARGETS)
    assert "train throughput (TopK" in done and "activations/s" in done and "the larger store over the smaller" in done


def test_the_attribution_benchmark_runs_and_reports(tmp_path, capsys):
    """benchmarks/attribution.py on one scene: attribution patching against exact patching
    on the toy (no figure asserted: a smoke run)."""
    import attribution

    out = tmp_path / "attribution.json"
    assert attribution.main(["--scenes", "1", "--repeats", "1", "--out", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    assert -1 <= summary["spearman, lowest"] <= summary["spearman, median"] <= 1
    assert summary["exact passes"] == 3 * 36 + 2 and summary["attribution passes"] == 3
    assert summary["exact (s), median"] > 0 and summary["attribution (s), median"] > 0
    assert "speed-up (wall time), median" in capsys.readouterr().out


def test_the_gradients_benchmark_runs_and_reports(tmp_path, capsys):
    """benchmarks/gradients.py --smoke: vlreg's .grad against a hand autograd loop on the tiny
    checkpoint (no timing asserted); the two read the same gradients."""
    import gradients

    out = tmp_path / "gradients.json"
    assert gradients.main(["--smoke", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["equal to the hand loop's"] is True and results["gradients read"] == 3
    assert results["vlreg / hand loop"] > 0 and "vlreg / hand loop" in capsys.readouterr().out
