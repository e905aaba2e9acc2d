"""Which plugins load, in a fresh process: the allow and block lists, and a host that
survives a plugin that cannot be imported.

A process per setting of the environment, shared by the tests that read it: each reports
what loaded, what was skipped and why, what was warned, and what loading the checkpoints
it is given did (traced, or the error). vlreg-internvl checks it works alone in its own
tests (its text part another family's plugin serves)."""

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.heavy  # a process per plugin setting: started first under make test

REPORT = textwrap.dedent(
    """
    import json, os, sys, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from vlreg.core.host import plugins
        manager = plugins.plugin_manager()
    report = {
        "loaded": sorted(name for name, _ in manager.list_name_plugin()),
        "skipped": plugins.skipped,
        "warnings": [str(w.message) for w in caught if "vlreg" in str(w.message)],
        "checkpoints": {},
    }
    for name in sys.argv[1:]:  # each built here (or a folder), loaded and traced: what serves it, or the error loading it
        import torch
        from PIL import Image
        from vlreg import StandardizedTransformer
        from vlreg.testing import build, chat

        try:
            path = name if os.path.isdir(name) else str(build(name))
            model = StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu")
        except Exception as error:
            report["checkpoints"][name] = f"{type(error).__name__}: {error}"
            continue
        with model.trace(chat(model), images=[Image.new("RGB", (64, 64), "red")]):
            mask = model.vision.image_token_mask.save()
            features = model.vision.image_features.save()
            first = model.layers[0].input.save()
        assert torch.equal(first[mask], features)
        report["checkpoints"][name] = f"served by {model.family.name}"
    print(json.dumps(report))
    """
)


@functools.cache
def run(path: str = "", checkpoints: tuple = (), **environment: str):
    """The report of a process with ``environment`` (beside this one's, no other ``VLREG_``
    variable) and ``path`` on ``PYTHONPATH``, loading ``checkpoints`` (builders' names, or
    folders); the finished process
    where it failed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("VLREG_")}
    env.update(environment)
    if path:
        env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", REPORT, *checkpoints], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return done
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A distribution whose ``vlreg`` entry point names a module that does not exist."""
    folder = tmp_path_factory.mktemp("broken")
    info = folder / "vlreg_broken_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlreg-broken-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlreg]\nbroken = vlreg_module_that_is_not_there\n")
    return str(folder)


def test_a_plugin_that_fails_to_import_is_named_once_and_the_rest_load(broken):
    report = run(broken)
    assert "qwen2_vl" in report["loaded"] and "broken" not in report["loaded"]
    assert len(report["warnings"]) == 1
    assert "'broken' (vlreg-broken-example 0.1)" in report["warnings"][0]
    assert "vlreg_module_that_is_not_there" in report["warnings"][0]
    assert report["skipped"]["broken"].startswith("failed: ModuleNotFoundError")


def test_strict_loading_makes_the_failure_an_error(broken):
    done = run(broken, VLREG_STRICT_PLUGINS="1")
    assert done.returncode != 0
    assert "vlreg plugin 'broken' (vlreg-broken-example 0.1) failed to load" in done.stderr


def test_the_allowlist_loads_only_what_it_names():
    assert run(checkpoints=("qwen2_vl",), VLREG_LOAD_PLUGINS="qwen2_vl")["loaded"] == ["qwen2_vl"]
    report = run(VLREG_LOAD_PLUGINS="")
    assert report["loaded"] == []
    assert report["skipped"]["qwen2_vl"] == "not in VLREG_LOAD_PLUGINS"


def test_the_blocklist_leaves_out_what_it_names():
    from vlreg.testing import build

    report = run(checkpoints=(str(build("qwen2_vl")),), VLREG_DISABLE_PLUGINS="qwen2_vl,qwen2_5_vl")
    assert "qwen2_vl" not in report["loaded"] and "qwen2_5_vl" not in report["loaded"]
    assert report["skipped"]["qwen2_vl"] == "disabled by VLREG_DISABLE_PLUGINS"


@pytest.mark.parametrize(
    "variable, value, checkpoints, why",
    [("VLREG_DISABLE_PLUGINS", "qwen2_vl,qwen2_5_vl", (), "disabled by VLREG_DISABLE_PLUGINS"),
     ("VLREG_LOAD_PLUGINS", "llava", ("llava_interleave",), "not in VLREG_LOAD_PLUGINS")],
)
def test_a_disabled_plugin_is_named_as_installed_and_disabled(variable, value, checkpoints, why):
    from vlreg.testing import build

    folder = str(build("qwen2_vl"))  # here: the process the test starts has no plugin that builds it
    said = run(checkpoints=(*checkpoints, folder), **{variable: value})["checkpoints"][folder]
    assert said.startswith("NoFamily: No loaded vlreg plugin serves model_type 'qwen2_vl'")
    assert f"was not loaded: 'qwen2_vl' ({why})" in said
    assert "pip install" not in said


def test_a_name_no_plugin_has_is_warned_about():
    report = run(VLREG_DISABLE_PLUGINS="qwen2-vl", VLREG_LOAD_PLUGINS="qwen2_vl,llava,lava")
    warned = " ".join(report["warnings"])
    assert "VLREG_DISABLE_PLUGINS names 'qwen2-vl'" in warned and "VLREG_LOAD_PLUGINS names 'lava'" in warned
    assert "qwen2_vl" in report["loaded"]


@pytest.mark.parametrize(
    "plugin, checkpoints", [("qwen2_vl", ("qwen2_vl",)), ("qwen2_5_vl", ("qwen2_5_vl",)), ("llava", ("llava_interleave",))]
)
def test_each_builtin_family_works_alone(plugin, checkpoints):
    """Its checkpoint built, loaded and traced with only its plugin loaded."""
    if plugin == "llava":  # the process the disabled-plugin test starts
        from vlreg.testing import build

        checkpoints = (*checkpoints, str(build("qwen2_vl")))
    report = run(checkpoints=checkpoints, VLREG_LOAD_PLUGINS=plugin)
    assert report["loaded"] == [plugin]
    assert report["checkpoints"][checkpoints[0]] == f"served by {plugin}"
