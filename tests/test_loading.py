"""Which plugins load, in a fresh process: the allow and block lists, and a host that
survives a plugin that cannot be imported."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.heavy  # a process per plugin setting: started first under make test

REPORT = textwrap.dedent(
    """
    import json, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from vlreg.core.host import plugins
        manager = plugins.plugin_manager()
    print(json.dumps({
        "loaded": sorted(name for name, _ in manager.list_name_plugin()),
        "skipped": plugins.skipped,
        "warnings": [str(w.message) for w in caught if "vlreg" in str(w.message)],
    }))
    """
)


def run(tmp_path=None, **environment):
    env = {**os.environ, **environment}
    if tmp_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return done
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def broken(tmp_path):
    """A distribution whose ``vlreg`` entry point names a module that does not exist."""
    info = tmp_path / "vlreg_broken_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vlreg-broken-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vlreg]\nbroken = vlreg_module_that_is_not_there\n")
    return tmp_path


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
    assert run(VLREG_LOAD_PLUGINS="qwen2_vl")["loaded"] == ["qwen2_vl"]
    report = run(VLREG_LOAD_PLUGINS="")
    assert report["loaded"] == []
    assert report["skipped"]["qwen2_vl"] == "not in VLREG_LOAD_PLUGINS"


def test_the_blocklist_leaves_out_what_it_names():
    report = run(VLREG_DISABLE_PLUGINS="qwen2_vl")
    assert "qwen2_vl" not in report["loaded"]
    assert report["skipped"]["qwen2_vl"] == "disabled by VLREG_DISABLE_PLUGINS"


@pytest.mark.parametrize(
    "variable, value, why",
    [("VLREG_DISABLE_PLUGINS", "qwen2_vl,qwen2_5_vl", "disabled by VLREG_DISABLE_PLUGINS"),
     ("VLREG_LOAD_PLUGINS", "llava", "not in VLREG_LOAD_PLUGINS")],
)
def test_a_disabled_plugin_is_named_as_installed_and_disabled(variable, value, why):
    from vlreg.testing import build

    code = f"from vlreg import StandardizedTransformer\nStandardizedTransformer({str(build('qwen2_vl'))!r}, task='image-text-to-text')"
    env = {key: item for key, item in os.environ.items() if not key.startswith("VLREG_")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, variable: value}, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "NoFamily: No loaded vlreg plugin serves model_type 'qwen2_vl'" in done.stderr
    assert f"was not loaded: 'qwen2_vl' ({why})" in done.stderr
    assert "pip install" not in done.stderr


def test_a_name_no_plugin_has_is_warned_about():
    report = run(VLREG_DISABLE_PLUGINS="qwen2-vl", VLREG_LOAD_PLUGINS="qwen2_vl,llava,lava")
    warned = " ".join(report["warnings"])
    assert "VLREG_DISABLE_PLUGINS names 'qwen2-vl'" in warned and "VLREG_LOAD_PLUGINS names 'lava'" in warned
    assert "qwen2_vl" in report["loaded"]


ALONE = textwrap.dedent(
    """
    import torch
    from PIL import Image
    from vlreg import StandardizedTransformer
    from vlreg.core.host import plugins
    from vlreg.testing import build

    assert [name for name, _ in plugins.plugin_manager().list_name_plugin()] == [{plugin!r}]
    model = StandardizedTransformer(str(build({checkpoint!r})), task="image-text-to-text", dispatch=True, device="cpu")
    messages = [{{"role": "user", "content": [{{"type": "image"}}, {{"type": "text", "text": "What is in this image?"}}]}}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[Image.new("RGB", (64, 64), "red")]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert torch.equal(first[mask], features)
    print("served by", model.family.name)
    """
)


@pytest.mark.parametrize(
    "plugin, checkpoint", [("qwen2_vl", "qwen2_vl"), ("qwen2_5_vl", "qwen2_5_vl"), ("llava", "llava_interleave")]
)
def test_each_builtin_family_works_alone(plugin, checkpoint):
    env = {**os.environ, "VLREG_LOAD_PLUGINS": plugin}
    code = ALONE.format(plugin=plugin, checkpoint=checkpoint)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"served by {plugin}" in done.stdout
