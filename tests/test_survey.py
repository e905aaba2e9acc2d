"""`vlreg new-plugin`'s survey on families vlreg does not serve yet, from transformers'
own config classes built on the meta device: where it finds the blocks, the scatter and
the projector, and what it says it cannot know (`vlreg.template.survey`)."""

from __future__ import annotations

import importlib
import sys
import tomllib

import pytest
import torch
import transformers

from vlreg.cli import main
from vlreg.core.host import plugins
from vlreg.plugin import Part
from vlreg.testing import registered
from vlreg.template import survey, write_plugin
from vlreg.template import modules as tree


def surveyed(tmp_path, config):
    config.save_pretrained(tmp_path / "source")
    return survey(tmp_path / "source")


def notes(found, kind):
    return " ".join(found.notes[kind])


def test_blocks_are_found_where_the_first_block_is_a_convolution(tmp_path):
    # LFM2's blocks mix tokens by a short convolution or by attention (config.layer_types)
    config = transformers.Lfm2VlConfig(text_config={"layer_types": ["conv", "full_attention"], "num_hidden_layers": 2})
    found = surveyed(tmp_path, config)
    assert found.native["layers"] == "model.language_model.layers"
    assert found.norm == "embedding_norm"  # LFM2's final norm
    assert {cls.__name__: kind for cls, kind in found.text_envoys.items()} == {
        "Lfm2DecoderLayer": "Layer", "Lfm2Attention": "Attention", "Lfm2MLP": "Mlp"}
    assert found.text_rename == {"feed_forward": "mlp"}
    assert "conv (Lfm2ShortConv)" in notes(found, "text")
    assert "Mixer('<standard name>', native='conv')" in notes(found, "text")  # how to declare the kind
    assert found.scatter == ("model", "inputs_embeds_masked_scatter_0", 1)


def test_the_blocks_are_the_list_the_forward_runs_first_not_the_longest():
    # a BART encoder-decoder (Florence-2's text model): the image is written into the
    # encoder's input, and a deeper decoder is not taken for the blocks
    with torch.device("meta"):
        bart = transformers.BartModel(transformers.BartConfig(encoder_layers=1, decoder_layers=3))
    assert tree.blocks(bart) == "encoder.layers"


@pytest.mark.parametrize("family, operation", [
    ("Blip2Config", "masked_scatter_0"),  # inputs_embeds.to(...).masked_scatter(mask, language_model_inputs)
    ("InstructBlipConfig", "inputs_embeds_masked_scatter_0"),
])
def test_a_scatter_in_the_roots_own_forward_is_found_beside_a_qformer(family, operation, tmp_path):
    found = surveyed(tmp_path, getattr(transformers, family)())
    assert found.scatter == ("", operation, 1)
    assert found.projector == "language_projection", "the Q-Former is another part, not the projector"
    assert found.native["layers"] == "language_model.model.decoder.layers"
    assert found.native["norm"] == "language_model.model.decoder.final_layer_norm"
    assert "qformer_config" in notes(found, "wrapper") and "at qformer" in notes(found, "wrapper")


@pytest.mark.parametrize("family", ["Qwen2_5OmniThinkerConfig", "Qwen3OmniMoeThinkerConfig"])
def test_an_audio_scatter_is_never_taken_for_the_images(family, tmp_path):
    # the omni thinkers write the audio's features first, then the image's
    found = surveyed(tmp_path, getattr(transformers, family)())
    assert found.scatter == ("model", "inputs_embeds_masked_scatter_1", 1)
    assert found.projector == "model.visual.merger", "the audio tower is another part, not the projector"
    assert "audio_config" in notes(found, "wrapper")


def test_gemma3n_writes_the_image_first_and_the_audio_after(tmp_path):
    pytest.importorskip("timm", reason="Gemma 3n's tower is a timm model, and timm is not installed")
    found = surveyed(tmp_path, transformers.Gemma3nConfig())
    assert found.scatter == ("model", "inputs_embeds_masked_scatter_0", 1)


def test_a_perceiver_is_named_as_another_part_inside_the_projector(tmp_path):
    found = surveyed(tmp_path, transformers.Idefics2Config())
    assert found.projector == "model.connector"
    assert "perceiver_config ('idefics2_perceiver', at model.connector.perceiver_resampler)" in notes(found, "wrapper")


def test_a_tower_without_attention_blocks_is_served_without_blocks(tmp_path):
    # Florence-2's DaViT: stages of blocks of different widths (its embed_dim is a tuple)
    found = surveyed(tmp_path, transformers.Florence2Config())
    assert found.native["layers"] == "model.language_model.encoder.layers"
    assert found.vision == "model.vision_tower" and found.tower_layers is None
    assert "vision.layers" not in found.native
    assert "Vision with no blocks" in notes(found, "vision")
    assert found.scatter == ("model", "inputs_embeds_masked_scatter_0", 1)


#: A vocabulary map the Emu3 and Chameleon configs need to build (their defaults hold none).
EMU3_VOCABULARY = {"<image>": 5, "<|extra_200|>": 6, **{f"<|visual token{code:06d}|>": 10 + code for code in range(8)}}
CHAMELEON_VOCABULARY = {"<image>": 5, **{f"IMGIMG{chr(65 + code)}Z": 10 + code for code in range(4)}}


@pytest.mark.parametrize("family, vocabulary, text, scatter", [
    ("Emu3Config", EMU3_VOCABULARY, "model.text_model", ("model", "inputs_embeds_masked_scatter_0", 1)),
    # Chameleon's text model is the whole config's, and writes the image in its own forward
    ("ChameleonConfig", CHAMELEON_VOCABULARY, "model", ("model", "inputs_embeds_masked_scatter_0", 1)),
])
def test_a_config_without_a_vision_config_is_surveyed_and_says_what_its_skeleton_cannot_serve(
        family, vocabulary, text, scatter, tmp_path, capsys):
    config = getattr(transformers, family)(vocabulary_map=vocabulary)
    found = surveyed(tmp_path, config)
    assert set(found.parts) == {"wrapper", "text"} and found.vision is None
    assert found.native["layers"] == f"{text}.layers" and found.scatter == scatter
    assert "has no vision_config" in notes(found, "wrapper")
    assert "vq_config" in notes(found, "wrapper")

    # a family vlreg serves (vlreg-chameleon serves both) is written with its plugin taken
    # out, as the CLI says to, and under a name of its own (the installed package keeps its)
    name = family.removesuffix("Config").lower() + "_skeleton"
    serving = plugins.claimant("wrapper", config.model_type)
    with registered(replacing=[serving] if serving is not None else []):
        written = write_plugin(name, tmp_path, tmp_path / "source")
    sys.path.insert(0, str(written))
    try:
        plugin = importlib.import_module(f"vlreg_{name}").plugin
    finally:
        sys.path.remove(str(written))
    claims = {(claim.kind, claim.model_type) for claim in plugin.vlreg_claims()}
    assert claims == {("wrapper", found.parts["wrapper"]), ("text", found.parts["text"])}
    registered_as = tomllib.loads((written / "pyproject.toml").read_text())["project"]["entry-points"]["vlreg"]
    assert registered_as == {name: f"vlreg_{name}:plugin"}  # its claims are the declaration's alone
    wrapper = Part("wrapper", found.parts["wrapper"], config, config)
    assert plugin.vlreg_entry(wrapper) is None, "the survey writes no entry for an image read as discrete codes"
    assert "TextConformance" in (written / "tests" / "test_conformance.py").read_text()

    # the command says which parts installed plugins serve, the vq_config's among them
    assert main(["new-plugin", name, "--from", str(tmp_path / "source"), "--out", str(tmp_path / "cli")]) == 0
    said = capsys.readouterr().out
    assert f"the vision part {config.vq_config.model_type!r} is served by" in said


def test_the_template_modules_import_one_another_one_way():
    """No module of `vlreg.template` imports the package (its ``__init__`` imports them) or,
    at module level or inside a function, a module that imports it back."""
    import ast
    import graphlib
    from pathlib import Path

    import vlreg.template

    folder = Path(vlreg.template.__file__).parent
    imports = {}
    for path in folder.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert node.module, f"{path.name} imports the package vlreg.template"
                found.add(node.module.split(".")[0])
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            assert not any(name.startswith("vlreg.template") for name in names), f"{path.name} imports the package"
        imports[path.stem] = found
    graphlib.TopologicalSorter(imports).prepare()  # raises CycleError on a circle
