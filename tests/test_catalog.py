"""The host learns what serves a model type from the plugins' own declarations: a plugin
installed but not loaded is imported and asked (never registered), and the catalog of the
repository's plugins (``vlreg/core/host/catalog.json``), generated from their declarations
by this file (``make catalog`` runs it), names one not installed.

For every part a built-in plugin serves (wrapper, text and vision), the `NoFamily` a
user meets names that plugin's distribution: disabled, in one fresh process where every
built-in plugin is; not installed, in this process with the plugin taken out of the host.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from vlreg import NoFamily, hookimpl
from vlreg.core.host import plugins
from vlreg.core.host.parts import KINDS
from vlreg.core.host.family import parts_of, resolve
from vlreg.plugin import Claim
from vlreg.testing import registered
from vlreg.testing.sampling import sample

ROOT = Path(__file__).resolve().parents[1]


def served_by(name: str) -> list[tuple[str, str]]:
    """What the loaded plugin ``name`` claims, from its hooks (not its metadata)."""
    plugin = plugins.plugin_manager().get_plugin(name)
    return sorted(key for key, served in plugins.claims().items() if served is plugin)


@functools.cache
def defaults(wrapper: str):
    """A wrapper's default config, built once a process (the search for a part's wrapper
    would otherwise build each of ~90 configs again for every part asked). Its parts are
    read each time: they can depend on the plugins loaded (`vision_config`)."""
    from transformers import AutoConfig

    return AutoConfig.for_model(wrapper)


def config_with(kind: str, model_type: str, wrappers: list[str]):
    """A transformers config whose ``kind`` part is ``model_type``: a wrapper's defaults,
    else the defaults of a served wrapper that has that part, else LLaVA's with it."""
    from transformers import CONFIG_MAPPING, AutoConfig, LlavaConfig

    if kind == "wrapper":
        return AutoConfig.for_model(model_type)
    for wrapper in wrappers:
        config = defaults(wrapper)
        part = parts_of(config).get(kind)
        if part is not None and part.model_type == model_type:
            return config
    return LlavaConfig(**{f"{kind}_config": CONFIG_MAPPING[model_type]()})


class StandIn:
    """Serves the parts of a config that come before the one under test, so loading it
    stops there: no other hook is ever called."""

    def __init__(self, parts):
        self.parts = parts

    @hookimpl
    def vlreg_claims(self):
        return [Claim(kind, model_type) for kind, model_type in self.parts]


def message(kind: str, model_type: str, wrappers: list[str]) -> str:
    """What loading a config whose ``kind`` part is ``model_type`` raises, with the
    parts before it served by a stand-in (in place of whatever serves them here)."""
    config = config_with(kind, model_type, wrappers)
    parts = parts_of(config)
    before = [(part.kind, part.model_type) for part in parts.values()][: list(parts).index(kind)]
    holders = {plugins.claimant(*key) for key in before} - {None}
    with registered(StandIn(before), name="stand-in", replacing=holders):
        with pytest.raises(NoFamily) as caught:
            resolve(config)
    return str(caught.value)


def messages(cases: list[tuple[str, str]], wrappers: list[str]) -> dict[str, str]:
    return {f"{kind}:{model_type}": message(kind, model_type, wrappers) for kind, model_type in cases}


def generate() -> dict[str, dict]:
    """The catalog, asked of the plugins the repository's ``plugins/*/pyproject.toml`` register
    (installed: ``make install``)."""
    found = {}
    for path in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(path.read_text())["project"]
        (target,) = project["entry-points"]["vlreg"].values()
        module, _, attribute = target.partition(":")
        plugin = getattr(importlib.import_module(module), attribute)
        found[project["name"]] = {
            "folder": path.parent.relative_to(ROOT).as_posix(),
            "claims": sorted({f"{claim.kind}:{claim.model_type}" for claim in plugins.claims_of(plugin)}),
            "adapters": sorted(plugins.ask(plugin, "vlreg_adapters") or {}),
        }
    return found


def written(catalog: dict[str, dict]) -> str:
    """The catalog's text: a distribution a line."""
    return "{\n" + ",\n".join(f" {json.dumps(dist)}: {json.dumps(entry)}" for dist, entry in catalog.items()) + "\n}\n"


def test_the_catalog_is_the_repositorys_plugins_declarations():
    assert plugins.CATALOG.read_text() == written(generate()), "a plugin's declaration changed: run `make catalog`"


def installed() -> dict[str, str]:
    """The built-in plugins installed here: entry-point name -> distribution."""
    return {ep.name: ep.dist.name for ep in plugins._entry_points() if ep.dist and ep.dist.name in plugins.catalog()}


def cases() -> tuple[list[tuple[str, str, str]], list[str]]:
    """Every part an installed built-in plugin serves, with the plugin's name, and the wrappers they serve
    (not another part, a Q-Former's: a checkpoint loads without it, which `Family.unserved` names; nor a
    type a later transformers adds, which no config here can have)."""
    from transformers import CONFIG_MAPPING

    found = [(kind, model_type, name) for name in installed() for kind, model_type in served_by(name)
             if kind in KINDS and model_type in CONFIG_MAPPING]
    return found, sorted(model_type for kind, model_type, _ in found if kind == "wrapper")


#: How many served parts the disabled-plugins check asks about in one run.
PARTS_A_RUN = 40
#: How many of a plugin's parts the not-installed check asks about in one run.
PLUGIN_PARTS_A_RUN = 3

DISABLED = """
import json, runpy, sys, warnings
warnings.simplefilter("ignore")
helpers = runpy.run_path(sys.argv[1])
print(json.dumps(helpers["messages"](json.loads(sys.argv[2]), json.loads(sys.argv[3]))))
"""


def test_a_disabled_plugin_is_named_for_every_part_it_serves():
    """Every plugin disabled at once: each part's message names the plugin that would serve it.
    A sample of the parts a run (`PARTS_A_RUN`, drawn from the run's seed; every one over runs,
    or with ``VLREG_TEST_SAMPLES=all``): each message loads the part's config."""
    found, wrappers = cases()
    found = sample(found, PARTS_A_RUN, "disabled plugins' parts")
    names = installed()
    env = {key: value for key, value in os.environ.items() if not key.startswith("VLREG_")}
    env["VLREG_DISABLE_PLUGINS"] = ",".join(names)
    done = subprocess.run(
        [sys.executable, "-c", DISABLED, __file__, json.dumps([case[:2] for case in found]), json.dumps(wrappers)],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    for kind, model_type, name in found:
        text = said[f"{kind}:{model_type}"]
        assert f"model_type {model_type!r}" in text, text
        assert f"was not loaded: {name!r} (disabled by VLREG_DISABLE_PLUGINS) from {names[name]} " in text, text
        assert "pip install" not in text


@pytest.mark.parametrize("name", sorted(installed()))
def test_a_plugin_not_installed_is_named_with_its_folder_for_every_part_it_serves(name):
    """`PLUGIN_PARTS_A_RUN` of the plugin's parts a run (each loads its config), drawn from the
    run's seed: every one over runs, or with ``VLREG_TEST_SAMPLES=all``."""
    found, wrappers = cases()
    dist = installed()[name]
    folder = plugins.catalog()[dist]["folder"]
    plugin = plugins.plugin_manager().get_plugin(name)
    asked = sample([case[:2] for case in found if case[2] == name], PLUGIN_PARTS_A_RUN, f"{name} not installed")
    with registered(None, replacing=[plugin]):  # neither loaded nor held back: the host knows only the catalog
        said = messages(asked, wrappers)
    assert len(said) == len(asked)
    for key, text in said.items():
        assert f"model_type {key.partition(':')[2]!r}" in text, text
        assert f"install the {dist} distribution (from the vlreg repository: pip install ./{folder})" in text, text


ASKED = """
import os
from vlreg import hookimpl
from vlreg.plugin import Claim

os.environ["ASKED_IMPORTED"] = "1"

@hookimpl
def vlreg_claims():
    return [Claim("wrapper", "qwen2_vl")]

@hookimpl
def vlreg_rename(part):
    raise RuntimeError("a disabled plugin was run")
"""
REPORT = """
import os
from transformers import AutoConfig
from vlreg import NoFamily
from vlreg.core.host import family, plugins
try:
    family.resolve(AutoConfig.for_model("qwen2_vl"))
except NoFamily as error:
    print(error)
print(os.environ.get("ASKED_IMPORTED"), plugins.plugin_manager().get_plugin("asked"))
"""


def distribution(folder: Path, name: str, module: str, source: str, entry_points: str) -> None:
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def test_a_disabled_third_party_plugin_is_imported_to_be_named_and_never_registered(tmp_path):
    distribution(tmp_path, "vlreg-asked", "asked", ASKED, "[vlreg]\nasked = asked\n")
    distribution(tmp_path, "vlreg-unimportable", "unimportable", "raise ImportError('gone')\n",
                 "[vlreg]\nunimportable = unimportable\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("VLREG_")}
    env.update(PYTHONPATH=str(tmp_path), VLREG_DISABLE_PLUGINS="asked,unimportable,qwen2_vl")
    done = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said, asked = done.stdout.strip().rsplit("\n", 1)
    assert "'asked' (disabled by VLREG_DISABLE_PLUGINS) from vlreg-asked 0.1" in said
    assert "'qwen2_vl' (disabled by VLREG_DISABLE_PLUGINS) from vlreg-qwen2-vl" in said
    assert "unimportable" not in said  # a plugin that cannot be imported cannot say what it serves
    assert asked == "1 None"  # imported to be asked, never registered


if __name__ == "__main__":  # make catalog
    plugins.CATALOG.write_text(written(generate()))
