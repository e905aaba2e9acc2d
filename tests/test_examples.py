"""The Gemma 3 example is a third-party plugin: installed from its folder with pip, it
is found through its entry point, serves Gemma 3 with its SigLIP tower from vlreg-llava,
and passes the conformance suite."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vlreg_llava", reason="the Gemma 3 example reuses vlreg-llava's SigLIP tower (plugins/llava)")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gemma3"
DISTRIBUTION = "vlreg-gemma3-example"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The environment of a process in which the example is pip-installed, as a user would."""
    target = tmp_path_factory.mktemp("installed")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(EXAMPLE)],
        capture_output=True, text=True, timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}


def run(env, *command, **options):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, **options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def vlreg(env, *arguments):
    return run(env, sys.executable, "-m", "vlreg", *arguments)


def test_it_is_listed_with_its_distribution(env):
    rows = {row["name"]: row for row in json.loads(vlreg(env, "plugins", "--all", "--json"))}
    gemma3 = rows["gemma3"]
    assert (gemma3["distribution"], gemma3["version"], gemma3["families"]) == (DISTRIBUTION, "0.1.0", ["gemma3"])
    assert gemma3["parts"] == {"wrapper": ["gemma3"], "text": ["gemma3_text"], "vision": []}
    assert "siglip_vision_model" in rows["llava"]["parts"]["vision"]
    assert f"gemma3 ({DISTRIBUTION} 0.1.0): families gemma3" in vlreg(env, "plugins")


def test_it_serves_gemma3_with_the_llava_plugins_siglip_tower(env, tmp_path):
    checkpoint = tmp_path / "gemma3"
    run(env, sys.executable, "-c", f"from vlreg.testing import build; build('gemma3', {str(checkpoint)!r})")
    report = json.loads(vlreg(env, "inspect", str(checkpoint), "--json"))
    assert report["family"] == "gemma3" and report["class"] == "Gemma3ForConditionalGeneration"
    parts = report["parts"]
    assert (parts["wrapper"]["model_type"], parts["text"]["model_type"], parts["vision"]["model_type"]) == (
        "gemma3", "gemma3_text", "siglip_vision_model"
    )
    assert DISTRIBUTION in parts["wrapper"]["plugin"] and DISTRIBUTION in parts["text"]["plugin"]
    assert "vlreg-llava" in parts["vision"]["plugin"]
    assert report["support"]["vision.image_features"] is None


def test_it_passes_its_own_tests_and_the_conformance_suite(env, tmp_path):
    out = run(env, sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(EXAMPLE / "tests"), cwd=tmp_path)
    assert " failed" not in out and " error" not in out
    for test in ("test_block_identity", "test_features_are_what_block_0_receives_at_the_image_tokens",
                 "test_tower_block_identity", "test_support_lists_every_value"):
        assert f"test_conformance.py::TestGemma3::{test} PASSED" in out, test
