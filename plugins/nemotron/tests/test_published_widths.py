"""NemotronH Omni at the widths transformers' default config carries (C-RADIO-H's tower:
32 blocks 1280 wide, 16-pixel patches after 3 summary and 7 register tokens; a NemotronH
text model 4096 wide with one block of each kind), built on the meta device (no
weights), `vlreg inspect` of that config, and the census."""

import json

import pytest
from transformers import AutoProcessor
from transformers.models.nemotron_h_omni import NemotronH_Omni_Reasoning_V3_Config

from vlreg import StandardizedTransformer
from vlreg.cli import coverage, main
from vlreg.plugin import Mamba
from vlreg.testing import build


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("nemotron-h-omni-default")
    NemotronH_Omni_Reasoning_V3_Config().save_pretrained(path)
    return path


def test_the_published_widths_on_meta(folder, tmp_path):
    AutoProcessor.from_pretrained(build("nemotron_h_omni")).save_pretrained(tmp_path)  # nothing is processed on meta
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager",
                                    processor=str(tmp_path))
    assert not model.dispatched
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
            vision.patch_size, vision.class_tokens) == (32, 1280, 16, 80, 5120, 16, 10)
    assert model.projector.linear_1.weight.shape == (4096, 4 * 1280)  # 2 x 2 patches a token
    kinds = model._module.config.text_config.layers_block_type
    assert kinds == ["linear_attention", "moe", "full_attention", "mlp"]
    mixers = [[name for name in ("mamba", "self_attn", "mlp") if name in block.__dict__] for block in model.layers]
    assert mixers == [["mamba"], ["mlp"], ["self_attn"], ["mlp"]]
    mamba = model.layers[0].mamba
    assert isinstance(mamba, Mamba)
    assert (mamba.num_heads, mamba.head_dim, mamba.num_groups, mamba.state_size, mamba.conv_dim) == (128, 64, 8, 128, 10240)
    assert (model.layers[1].mlp.num_experts, model.layers[1].mlp.top_k) == (8, 2)
    rows = model.support()
    inside = ("time_steps", "decays", "state_output") if mamba.one_call else ()  # refused in transformers 5.25
    assert all((reason is None) != row.endswith(inside) for row, reason in rows.items() if ".mamba." in row)
    assert list(model.read_only()) == ["vision.image_token_mask", *(() if inside else ["layers.0.mamba.state_output"])]


def test_inspect_reads_the_config_alone(folder, capsys):
    assert main(["inspect", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "nemotron" and report["class"] == "NemotronH_Omni_Reasoning_V3"
    assert {kind: part["model_type"] for kind, part in report["parts"].items()} == {
        "wrapper": "nemotron_h_omni", "text": "nemotron_h", "vision": "radio"}
    assert all(part["plugin"].startswith("plugin 'nemotron' (vlreg-nemotron") for part in report["parts"].values())
    assert report["aliases"]["model"]["layers"] == "language_model.model.layers"
    assert report["aliases"]["layers[0]"] == {"mamba": "mixer"}
    assert report["aliases"]["vision"] == {"layers": "encoder.layer", "patch_embed": "embeddings"}
    assert report["vision sizes"]["image_size"] == "variable (per image)"
    assert report["support"]["vision.image_features"] is None
    assert report["support"]["layers.0.mamba.attention_head_outputs"] is None
    assert report["support"]["layers.1,3.mlp.mlp_output"] is None


def test_the_census_serves_it():
    assert "vlreg-nemotron" in coverage()["nemotron_h_omni"]


def test_an_audio_tower_is_built_and_left_unnamed(folder, tmp_path):
    """The published checkpoint also carries a Parakeet audio tower; no standard name binds
    in it, and the names and support table are those of the same model without it."""
    audio = tmp_path / "with-audio"
    NemotronH_Omni_Reasoning_V3_Config(audio_config={"projection_hidden_size": 4096, "projection_bias": False}).save_pretrained(audio)
    processor = tmp_path / "processor"
    AutoProcessor.from_pretrained(build("nemotron_h_omni")).save_pretrained(processor)
    with_audio, without = (
        StandardizedTransformer(str(path), task="image-text-to-text", dispatch=False, processor=str(processor))
        for path in (audio, folder)
    )
    assert with_audio._module.audio_tower is not None and without._module.audio_tower is None
    assert with_audio._aliases == without._aliases
    assert with_audio.support() == without.support()
    inside = list(with_audio.audio_tower.modules())
    assert len(inside) > 100 and not [envoy for envoy in inside if envoy._aliases], "a standard name bound in the audio tower"
