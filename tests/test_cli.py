"""The ``vlreg`` command."""

import json
import shutil
import subprocess
import sys

import pytest

from vlreg.cli import main
from vlreg.testing import build


def test_plugins_json_lists_the_builtin_families(capsys):
    assert main(["plugins", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["qwen2_vl"]["distribution"] == "vlreg-qwen2-vl" and rows["qwen2_vl"]["families"] == ["qwen2_vl"]
    assert rows["qwen2_5_vl"]["distribution"] == "vlreg-qwen2-5-vl" and rows["qwen2_5_vl"]["families"] == ["qwen2_5_vl"]
    assert rows["llava"]["distribution"] == "vlreg-llava"
    assert rows["llava"]["families"] == ["llava", "llava_next", "llava_onevision"]


def test_plugins_all_lists_parts_and_hooks(capsys):
    assert main(["plugins", "--all", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "siglip_vision_model" in rows["llava"]["parts"]["vision"]
    assert "vlreg_scatter" in rows["qwen2_vl"]["hooks"]


def test_inspect_reads_the_config_and_prints_the_support_table(capsys):
    checkpoint = build("llava_interleave")
    assert main(["inspect", str(checkpoint), "--attn-implementation", "eager"]) == 0
    out = capsys.readouterr().out
    assert "LlavaForConditionalGeneration, family 'llava'" in out
    assert "vision: siglip_vision_model served by plugin 'llava'" in out
    assert "'projector': 'model.multi_modal_projector'" in out
    row = next(line for line in out.splitlines() if "vision.image_features" in line)
    assert row.split()[-1] == "yes"


def test_inspect_json(capsys):
    assert main(["inspect", str(build("qwen2_vl")), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "qwen2_vl"
    assert report["support"]["vision.image_features"] is None
    assert "attn_implementation='eager'" in report["support"]["self_attn.attention_probabilities"]
    assert report["vision sizes"]["image_size"] == "variable (per image)"


def test_the_console_script_is_installed():
    done = subprocess.run([sys.executable, "-m", "vlreg", "--help"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "new-plugin" in done.stdout


def test_inspect_needs_no_processor_or_weights(capsys, tmp_path):
    shutil.copy(build("qwen2_vl") / "config.json", tmp_path / "config.json")  # as Qwen2-VL-7B's folder in ../shared
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "qwen2_vl" and "no processor files" in report["note"]
    assert report["support"]["vision.image_features"] is None
    assert "vision.tower_output" in report["read_only"]


def test_an_error_is_one_line_and_debug_shows_the_traceback(capsys):
    assert main(["inspect", "./no/such/checkpoint"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vlreg inspect: FileNotFoundError: no checkpoint folder at './no/such/checkpoint'")
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(FileNotFoundError):
        main(["--debug", "inspect", "./no/such/checkpoint"])


def test_coverage_lists_every_image_text_model_type_and_what_serves_it(capsys):
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    assert main(["plugins", "--coverage", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert set(rows) == set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)
    assert "vlreg-qwen3-vl" in rows["qwen3_5_moe"] and "vlreg-llava" in rows["llava_next"]
    assert "vlreg-mllama" in rows["mllama"] and rows["blip-2"] is None


def test_the_readmes_families_table_claims_nothing_the_census_does_not_serve():
    import re
    from pathlib import Path

    from vlreg.cli import coverage

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Families", 1)[1].split("\n## ", 1)[0]
    claimed = {name for row in table.splitlines() if row.startswith("| `")
               for name in re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])}
    served = {model_type for model_type, plugin in coverage().items() if plugin}
    assert claimed and claimed <= served, claimed - served
    assert served <= claimed, f"served but not in the README's table: {served - claimed}"
