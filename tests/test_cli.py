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
    assert rows["qwen2_5_vl"]["distribution"] == "vlreg-qwen2-5-vl"
    assert rows["qwen2_5_vl"]["families"] == ["llava_onevision1_5", "qwen2_5_vl"]  # claims, whatever transformers has
    assert rows["llava"]["distribution"] == "vlreg-llava"
    assert rows["llava"]["families"] == ["llava", "llava_next", "llava_next_video", "llava_onevision", "video_llava",
                                         "vipllava"]


def test_plugins_all_lists_parts_and_hooks(capsys):
    assert main(["plugins", "--all", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "siglip_vision_model" in rows["llava"]["parts"]["vision"]
    assert "vlreg_entry" in rows["qwen2_vl"]["hooks"]
    assert ["llava", "llava_interleave"] in rows["llava"]["checkpoints"] and ["llava_1_5"] in rows["llava"]["checkpoints"]


def test_plugins_all_lists_the_builder_names(capsys):
    assert main(["plugins", "--all"]) == 0
    out = capsys.readouterr().out
    assert ("checkpoints (vlreg.testing.build): llava = llava_interleave, llava_1_5, llava_next, llava_next_video, "
            "llava_onevision, llava_pixtral, video_llava") in out


def test_every_served_model_type_builds_by_its_name():
    """Builds are cheap (a fraction of a second each): all are built and their configs
    checked; loading each is what its plugin's conformance tests do, so here only the
    default that is not a builder of its own (LLaVA's) is loaded and traced."""
    from vlreg import StandardizedTransformer
    from vlreg.cli import coverage
    from vlreg.testing.conformance import image

    served = [model_type for model_type, plugin in coverage().items() if plugin]
    assert len(served) >= 20
    for model_type in served:
        assert json.loads((build(model_type) / "config.json").read_text())["model_type"] == model_type
    model = StandardizedTransformer(str(build("llava")), task="image-text-to-text", dispatch=True, device="cpu")
    content = [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]
    prompt = model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)
    with model.trace(prompt, images=[image(64, 48)]):
        features = model.vision.image_features.save()
    assert features.shape[-1] == model.hidden_size


def test_a_builder_name_no_plugin_has_suggests_the_closest():
    with pytest.raises(KeyError, match="no plugin builds a checkpoint named 'llava_15': did you mean 'llava_1_5'"):
        build("llava_15")


def test_inspect_reads_the_config_and_prints_the_support_table(capsys):
    checkpoint = build("llava_interleave")
    assert main(["inspect", str(checkpoint), "--attn-implementation", "eager"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{checkpoint}: model type 'llava' (LlavaForConditionalGeneration), family 'llava'")
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


#: What a subcommand imports when it runs, and ``--help`` must not: seconds of import.
HEAVY = ("torch", "transformers", "nnsight", "PIL", "numpy", "pluggy")

HELP = """
import sys
from vlreg.cli import main
for argv in (["--help"], ["inspect", "--help"], ["plugins", "--help"]):
    try:
        main(argv)
    except SystemExit:
        pass
print(sorted(name for name in sys.modules if name.split(".")[0] in {heavy!r}))
"""


def test_help_imports_nothing_a_subcommand_needs():
    """``vlreg --help``, ``vlreg inspect --help`` and ``vlreg plugins --help``, one after
    the other in a fresh process: none of them imports what a subcommand needs."""
    done = subprocess.run([sys.executable, "-c", HELP.format(heavy=set(HEAVY))], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("usage: vlreg") == 3
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_package_imports_its_names_when_first_used():
    code = "import sys, vlreg; before = 'torch' in sys.modules; vlreg.StandardizedTransformer; print(before, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False", "True"], done.stderr


def test_inspect_counts_the_parameters_and_their_memory_without_reading_weights(capsys, tmp_path):
    from transformers import AutoModelForImageTextToText

    source = build("qwen2_vl")
    shutil.copy(source / "config.json", tmp_path / "config.json")  # no weights, no processor
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    loaded = AutoModelForImageTextToText.from_pretrained(source)
    parameters = sum(parameter.numel() for parameter in loaded.parameters())
    assert report["model_type"] == "qwen2_vl" and report["parameters"] == parameters
    assert report["vision parameters"] == sum(parameter.numel() for parameter in loaded.model.visual.parameters())
    assert report["weight bytes"] == {"bfloat16": 2 * parameters, "float32": 4 * parameters}
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"parameters: {parameters:,} (" in out
    assert f"weights: {2 * parameters / 2**20:.1f} MiB in bfloat16, {4 * parameters / 2**20:.1f} MiB in float32" in out


def test_inspect_counts_a_real_geometry_as_published(capsys):
    from vlreg.testing import shared_checkpoint

    folder = shared_checkpoint("Qwen2-VL-2B-Instruct")
    if folder is None:
        pytest.skip("../shared/checkpoints (real configs) is not beside the repository")
    assert main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "parameters: 2,208,985,600 (2.21 B" in out  # the model card's 2.21 B, tied embeddings counted once
    assert "weights: 4.1 GiB in bfloat16, 8.2 GiB in float32" in out


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
    assert "vlreg-qwen3-vl" in rows["qwen3_5_moe"]["plugin"] and "vlreg-llava" in rows["llava_next"]["plugin"]
    assert "vlreg-mllama" in rows["mllama"]["plugin"] and "vlreg-blip" in rows["blip-2"]["plugin"]
    assert rows["kosmos-2.5"] == {"plugin": None, "refuses": {}, "declines": None}
    assert set(rows["gemma3n"]["refuses"]) == {"audio"} and "vlreg-gemma" in rows["gemma3n"]["plugin"]
    assert rows["gemma3"]["refuses"] == {}


def test_the_readmes_families_table_claims_nothing_the_census_does_not_serve():
    import re
    from pathlib import Path

    from vlreg.cli import coverage

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Families", 1)[1].split("\n## ", 1)[0]
    claimed = {name for row in table.splitlines() if row.startswith("| `")
               for name in re.findall(r"`([a-z0-9_-]+)`", row.split("|")[1])}
    rows = coverage()
    served = {model_type for model_type, plugin in rows.items() if plugin}
    claimed &= set(rows)  # a type a later transformers adds (its row says which) is not in this census
    assert claimed and claimed <= served, claimed - served
    assert served <= claimed, f"served but not in the README's table: {served - claimed}"


def test_the_readmes_builder_names_are_the_builders_and_build_what_they_say():
    import re
    from pathlib import Path

    from vlreg.testing import builders

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Checkpoints for tests: the builder names", 1)[1].split("\n## ", 1)[0]
    claimed = {}
    for row in table.splitlines():
        if row.startswith("| `"):
            names, types = (re.findall(r"`([a-z0-9_-]+)`", cell) for cell in row.split("|")[1:3])
            if not types:  # "the same": each name is its model type
                types = names
            elif len(types) == 1:
                types = types * len(names)
            claimed.update(zip(names, types, strict=True))
    assert set(claimed) == set(builders())
    from transformers import CONFIG_MAPPING

    for name, model_type in claimed.items():
        if model_type not in CONFIG_MAPPING:  # a later transformers' type: no config class to build here
            continue
        assert json.loads((build(name) / "config.json").read_text())["model_type"] == model_type, name
