"""The plugin host: entry points, claims, validation, and the error for an unserved config."""

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

import pluggy
import pytest

from vlreg_qwen2_vl import plugin as qwen2_vl
from vlreg import NoFamily, StandardizedTransformer, hookimpl
from vlreg.core.host import plugins
from vlreg.plugin import Claim
from vlreg.testing import Forwarding, build, registered


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


def test_builtin_families_load_through_the_entry_point_group():
    entry_points = {ep.name: ep for ep in importlib.metadata.entry_points(group="vlreg")}
    assert entry_points["qwen2_vl"].value == "vlreg_qwen2_vl:plugin"
    assert plugins.plugin_manager().get_plugin("qwen2_vl") is qwen2_vl
    assert plugins.distribution(qwen2_vl).name == "vlreg-qwen2-vl"
    assert plugins.claimant("wrapper", "qwen2_vl") is qwen2_vl


def test_an_unserved_config_names_its_model_type_the_families_and_what_to_install(path, tmp_path):
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    shutil.copy(f"{path}/config.json", config_only / "config.json")  # no weights: nothing may be read
    with registered(replacing=[qwen2_vl]):
        with pytest.raises(NoFamily) as caught:
            StandardizedTransformer(str(config_only), task="image-text-to-text", dispatch=True)
    message = str(caught.value)
    assert "'qwen2_vl'" in message
    assert "Installed families:" in message
    assert "vlreg-qwen2-vl" in message and "plugins/qwen2_vl" in message
    assert StandardizedTransformer(path, task="image-text-to-text").family.plugins["wrapper"] is qwen2_vl


def test_an_unserved_text_model_names_the_part(path, tmp_path):
    folder = tmp_path / "odd-text"
    folder.mkdir()
    config = json.loads(open(f"{path}/config.json").read())
    config["text_config"]["model_type"] = "olmo2"
    (folder / "config.json").write_text(json.dumps(config))

    class WrapperOnly:
        @hookimpl
        def vlreg_claims(self):
            return [Claim("wrapper", "qwen2_vl"), Claim("vision", "qwen2_vl_vision")]

    with registered(WrapperOnly(), name="wrapper-only", replacing=[qwen2_vl]):
        with pytest.raises(NoFamily, match="text model, model_type 'olmo2'"):
            StandardizedTransformer(str(folder), task="image-text-to-text")


def test_a_second_claim_leaves_only_that_part_contested_naming_both(path):
    class Impostor:
        @hookimpl
        def vlreg_claims(self):
            return [Claim("wrapper", "qwen2_vl"), Claim("wrapper", "impostor_vl")]

    impostor = Impostor()
    with pytest.warns(UserWarning, match="'qwen2_vl' is claimed by plugin 'qwen2_vl' \\(vlreg-qwen2-vl"):
        plugins.register(impostor, name="impostor")
    try:
        assert plugins.claimant("wrapper", "qwen2_vl") is None
        assert set(plugins.contenders("wrapper", "qwen2_vl")) == {qwen2_vl, impostor}
        assert plugins.claimant("text", "qwen2_vl_text") is qwen2_vl  # its other claims stand
        assert plugins.claimant("wrapper", "impostor_vl") is impostor
        with pytest.raises(NoFamily, match="VLREG_DISABLE_PLUGINS=.*overrides="):
            StandardizedTransformer(path, task="image-text-to-text")
    finally:
        plugins.unregister(impostor)
    assert plugins.claimant("wrapper", "qwen2_vl") is qwen2_vl


IMPOSTOR = """
from vlreg import hookimpl
from vlreg.plugin import Claim

@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "qwen2_vl")]
"""

REPORT = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from vlreg.core.host import plugins
    served = {key: plugins.plugin_manager().get_name(p) for key, p in plugins.claims().items()}
print(sorted(plugins.plugin_manager().get_name(p) for p in plugins.contenders("wrapper", "qwen2_vl")))
print(served.get(("text", "qwen2_vl_text")), served.get(("vision", "qwen2_vl_vision")), ("wrapper", "qwen2_vl") in served)
print(" | ".join(str(w.message) for w in caught))
"""


@pytest.mark.parametrize("entry_point", ["aaa_impostor", "zzz_impostor"])
def test_a_conflicting_entry_point_is_settled_the_same_whatever_its_name(entry_point, tmp_path):
    (tmp_path / "impostor_vl.py").write_text(IMPOSTOR)
    info = tmp_path / "impostor_vl-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: impostor-vl\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[vlreg]\n{entry_point} = impostor_vl\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("VLREG_LOAD_PLUGINS", None)
    env.pop("VLREG_DISABLE_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, check=True)
    contenders, served, warned = done.stdout.splitlines()
    assert contenders == str(sorted([entry_point, "qwen2_vl"]))
    assert served == "qwen2_vl qwen2_vl False"  # only the contested part is lost
    assert "vlreg-qwen2-vl" in warned and "impostor-vl 0.1" in warned
    assert "VLREG_DISABLE_PLUGINS=" in warned and "overrides=" in warned


def test_a_misspelled_hook_fails_loudly():
    class Misspelled:
        @hookimpl
        def vlreg_rename_paths(self, part):
            return {}

    misspelled = Misspelled()
    with pytest.raises(pluggy.PluginValidationError, match="vlreg_rename_paths"):
        plugins.register(misspelled, name="misspelled")
    assert not plugins.plugin_manager().is_registered(misspelled)


def test_a_hook_asking_for_an_argument_the_spec_lacks_fails_loudly():
    class WrongArgument:
        @hookimpl
        def vlreg_rename(self, part, model):
            return {}

    with pytest.raises(pluggy.PluginValidationError):
        plugins.register(WrongArgument(), name="wrong-argument")


def test_a_plugin_registered_by_hand_is_removed_after(path):
    class Quiet:
        @hookimpl
        def vlreg_checkpoints(self):
            return {}

    quiet = Quiet()
    with registered(quiet, name="quiet"):
        assert plugins.plugin_manager().get_plugin("quiet") is quiet
    assert plugins.plugin_manager().get_plugin("quiet") is None


def test_a_claim_that_overrides_the_holder_takes_the_part(path):
    class Patched(Forwarding):
        @hookimpl
        def vlreg_claims(self):
            return [Claim(kind, claim.model_type, overrides="qwen2_vl") for claim in qwen2_vl.vlreg_claims() for kind in [claim.kind]]

    with registered(Patched(qwen2_vl), name="patched"):
        assert plugins.claimant("wrapper", "qwen2_vl").__class__ is Patched
        assert StandardizedTransformer(path, task="image-text-to-text").family.name == "patched"
    assert plugins.claimant("wrapper", "qwen2_vl") is qwen2_vl


def test_two_plugins_of_one_name_are_refused_naming_both():
    with pytest.raises(ValueError, match="two plugins are named 'qwen2_vl'.*vlreg-qwen2-vl"):
        plugins.register(object(), name="qwen2_vl")


def test_loading_every_plugin_imports_no_modeling_module():
    """``import vlreg`` and loading the installed plugins stays cheap: a plugin imports
    transformers' modeling modules when a model of its family is built, not at load (one
    such import costs seconds of every user's start-up, whatever model they load)."""
    code = ("import sys, vlreg\nfrom vlreg.core.host.plugins import plugin_manager\nplugin_manager()\n"
            "print(sorted(m for m in sys.modules if m.startswith('transformers.models.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
