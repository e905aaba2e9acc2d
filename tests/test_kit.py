"""The test kit (`vlreg.testing`'s `load`, `chat`, the pytest plugin's ``model`` and the
run's samples) does what the tests of vlreg and of every family rely on."""

import os
import subprocess
import sys

import pytest

from vlreg.testing import build, chat, load, sampling

CHECKPOINTS = ("qwen2_vl", "llava_interleave")


def test_a_module_naming_checkpoints_runs_each_test_on_each(model, request):
    assert request.node.callspec.params["model"] in CHECKPOINTS
    assert model.family.name == {"qwen2_vl": "qwen2_vl", "llava_interleave": "llava"}[request.node.callspec.params["model"]]
    assert model.dispatched and model._module.config._attn_implementation == "eager"


def test_chat_writes_one_turn_through_the_models_own_template(model):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "image"}, {"type": "text", "text": "Which?"}]}]
    template = model.processor.apply_chat_template
    assert chat(model, text="Which?", images=2) == template(messages, add_generation_prompt=True, tokenize=False)
    assert chat(model, "image", "image", text="Which?", generation=False) == template(
        messages, add_generation_prompt=False, tokenize=False)
    assert chat(model, images=0) == template([{"role": "user", "content": [{"type": "text", "text": "What is in this image?"}]}],
                                             add_generation_prompt=True, tokenize=False)


def test_load_takes_a_folder_and_refuses_overrides_for_it():
    folder = build("qwen2_vl")
    assert load(folder, attn_implementation="sdpa")._module.config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match="overrides go to a builder"):
        load(folder, {"num_hidden_layers": 1})


def test_a_seed_repeats_its_sample_and_seeds_cover_everything(monkeypatch):
    monkeypatch.setenv("VLREG_TEST_SEED", "7")
    drawn = sampling.sample(range(50), 8, "writes")
    assert drawn == sampling.sample(range(50), 8, "writes") == sorted(set(drawn)) and len(drawn) == 8
    assert sampling.sample(range(50), 8, "reads") != drawn, "two checks draw the same sample"
    assert sampling.sample(range(5), 8, "writes") == list(range(5))
    covered = set()
    for seed in range(60):
        monkeypatch.setenv("VLREG_TEST_SEED", str(seed))
        covered.update(sampling.sample(range(50), 8, "writes"))
    assert covered == set(range(50))
    monkeypatch.setenv("VLREG_TEST_SAMPLES", "all")
    assert sampling.sample(range(50), 8, "writes") == list(range(50))
    monkeypatch.setenv("VLREG_TEST_SEED", "seven")
    with pytest.raises(ValueError, match="a whole number"):
        sampling.seed()


FAILING = """
from vlreg.testing import sampling

def test_fails():
    assert sampling.sample(range(50), 3, "x") == []
"""


def test_a_run_shows_its_seed_and_a_failure_says_how_to_draw_its_sample_again(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["vlreg.testing.pytest_plugin"]\n')
    (tmp_path / "test_failing.py").write_text(FAILING)
    env = {key: value for key, value in os.environ.items() if not key.startswith("VLREG_TEST")}
    runs = [subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", str(tmp_path)], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=300) for _ in range(2)]
    seeds = []
    for done in runs:
        assert done.returncode == 1, done.stdout[-2000:]
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("vlreg: sampled checks draw from seed")]
        seeds.append(line.split()[6])
        report = done.stdout.split("= FAILURES =")[1]
        assert f"VLREG_TEST_SEED={seeds[-1]} repeats this run's samples" in report, report
    assert seeds[0] != seeds[1], "two runs drew the same seed"
