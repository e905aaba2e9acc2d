"""The examples are third-party plugins: installed from their folders with pip, they are
found through their entry points. The VipLLaVA one overrides vlreg-llava's claim on the
VipLLaVA wrapper, serves VipLLaVA with its CLIP tower and Llama text model from vlreg-llava,
and passes the conformance suite; the streams one serves a type whose residual streams mix
(Qwen4-Exp, in place of vlreg-qwen3-vl) and passes the whole suite, no test overridden."""

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # pip, the CLI and pytest, each in a process: started first under make test

pytest.importorskip("vlreg_llava", reason="the VipLLaVA example reuses vlreg-llava's CLIP tower and Llama text (plugins/llava)")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "vipllava"
DISTRIBUTION = "vlreg-vipllava-example"
STREAMS = EXAMPLES / "streams"


def pip_install(target, *folders):
    """``pip install --no-deps --target`` of ``folders``, offline: built with the setuptools
    installed here where there is one (an isolated build would install it again first)."""
    isolation = [] if find_spec("setuptools") is None else ["--no-build-isolation"]
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *isolation, "--target", str(target),
         *map(str, folders)],
        capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The environment of a process in which the examples are pip-installed, as a user would."""
    # Named site-packages: while nnsight's remote="local" deserializes a request it keeps
    # only such folders importable, as a server keeps what is installed there.
    target = tmp_path_factory.mktemp("installed") / "site-packages"
    installed = pip_install(target, EXAMPLE, STREAMS)
    assert installed.returncode == 0, installed.stderr
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}


def run(env, *command, **options):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, **options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


#: One process where the examples are installed: pytest's verbose run of the folders after
#: argv[2], then the CLI's commands (`vlreg.cli.main` is what ``vlreg`` runs; a list ``["build",
#: name, folder]`` builds a checkpoint instead), what each printed written as JSON to argv[2]:
#: one import of torch and the plugins, not one a command. pytest first: its plugins must load
#: before nnsight is imported (anyio's fails on the ``save`` nnsight gives every object).
PROCESS = """
import contextlib, io, json, sys
import pytest
failed = pytest.main(["-v", "-p", "no:cacheprovider", *sys.argv[3:]])
from vlreg.cli import main
from vlreg.testing import build
said = {}
for command in json.loads(sys.argv[1]):
    if command[0] == "build":
        build(command[1], command[2])
        continue
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(command) == 0, command
    said[" ".join(command)] = out.getvalue()
with open(sys.argv[2], "w") as file:
    json.dump(said, file)
sys.exit(failed)
"""


@pytest.fixture(scope="module")
def ran(env, tmp_path_factory):
    """The CLI's output and the examples' own tests (the streams example's only where
    vlreg-qwen3-vl, which it overrides, is), in one process where the examples are installed."""
    scratch = tmp_path_factory.mktemp("examples")
    checkpoint, said = str(scratch / "vipllava"), scratch / "said.json"
    commands = [["plugins", "--all", "--json"], ["plugins"], ["plugins", "--coverage"], ["build", "vipllava", checkpoint],
                ["inspect", checkpoint, "--json"]]
    folders = [EXAMPLE / "tests"] + ([STREAMS / "tests"] if find_spec("vlreg_qwen3_vl") is not None else [])
    report = run(env, sys.executable, "-c", PROCESS, json.dumps(commands), str(said), *map(str, folders), cwd=scratch)
    return checkpoint, json.loads(said.read_text()), report


@pytest.fixture(scope="module")
def vlreg(ran):
    """What ``vlreg <command>`` prints, for the commands these tests read, in a process
    where the example is installed; ``vlreg("checkpoint")`` is the VipLLaVA checkpoint built there."""
    checkpoint, said, _ = ran
    return lambda *command: checkpoint if command == ("checkpoint",) else said[" ".join(command)]


@pytest.fixture(scope="module")
def examples_tests(ran):
    """pytest's verbose report of the examples' own tests, run where they are installed."""
    return ran[2]


def test_it_is_listed_with_its_distribution(vlreg):
    rows = {row["name"]: row for row in json.loads(vlreg("plugins", "--all", "--json"))}
    example = rows["vipllava"]
    assert (example["distribution"], example["version"], example["families"]) == (DISTRIBUTION, "0.1.0", ["vipllava"])
    assert example["parts"] == {"wrapper": ["vipllava"], "text": [], "vision": []}
    assert "clip_vision_model" in rows["llava"]["parts"]["vision"] and "llama" in rows["llava"]["parts"]["text"]
    assert "vipllava" not in rows["llava"]["parts"]["wrapper"]  # vlreg-llava claims it too; the example's claim wins
    assert f"vipllava ({DISTRIBUTION} 0.1.0): families vipllava" in vlreg("plugins")
    assert "plugin 'vipllava'" in vlreg("plugins", "--coverage")


def test_it_serves_vipllava_with_the_llava_plugins_tower_and_text(vlreg):
    report = json.loads(vlreg("inspect", vlreg("checkpoint"), "--json"))
    assert report["family"] == "vipllava" and report["class"] == "VipLlavaForConditionalGeneration"
    parts = report["parts"]
    assert (parts["wrapper"]["model_type"], parts["text"]["model_type"], parts["vision"]["model_type"]) == (
        "vipllava", "llama", "clip_vision_model"
    )
    assert DISTRIBUTION in parts["wrapper"]["plugin"]
    assert "vlreg-llava" in parts["vision"]["plugin"] and "vlreg-llava" in parts["text"]["plugin"]
    assert report["support"]["vision.image_features"] is None
    assert "edit vision.layers[1].layer_output" in report["read_only"]["vision.tower_output"]


def test_it_passes_its_own_tests_and_the_conformance_suite(examples_tests):
    assert " failed" not in examples_tests and " error" not in examples_tests
    for test in ("test_block_identity", "test_features_are_what_block_0_receives_at_the_image_tokens",
                 "test_tower_block_identity", "test_support_lists_every_value",
                 "test_every_value_written_reaches_the_logits_or_refuses"):
        assert f"test_conformance.py::TestVipLlava::{test} PASSED" in examples_tests, test


@pytest.mark.skipif(find_spec("vlreg_qwen3_vl") is None,
                    reason="the streams example overrides vlreg-qwen3-vl's Qwen4-Exp and builds its tiny checkpoint (plugins/qwen3_vl)")
def test_the_streams_example_passes_the_whole_suite_with_no_test_overridden(examples_tests):
    """Its test class sets no suite test aside: the remote ones run too (installed, its envoy
    classes travel by reference), and the block identity checked is the family's own."""
    assert " failed" not in examples_tests and " error" not in examples_tests
    suite = "test_conformance.py::TestQwen4ExpServedAsTheStreamsMean::"
    for test in ("test_this_plugin_serves_every_part", "test_block_identity",
                 "test_every_value_read_remotely_is_the_local_value",
                 "test_several_invokes_and_their_edits_run_remotely_as_locally",
                 "test_generating_with_an_edit_remotely_gives_the_local_tokens",
                 "test_every_value_written_reaches_the_logits_or_refuses"):
        assert f"{suite}{test} PASSED" in examples_tests, test
