"""NemotronH Omni at the widths transformers' default config carries (C-RADIO-H's tower:
32 blocks 1280 wide, 16-pixel patches after 3 summary and 7 register tokens; a NemotronH
text model 4096 wide with one block of each kind), built on the meta device (no
weights), `vlreg inspect` of that config, and the census."""

from transformers import AutoProcessor
from transformers.models.nemotron_h_omni import NemotronH_Omni_Reasoning_V3_Config

from vlreg.cli import coverage
from vlreg.plugin import Mamba
from vlreg.testing import build, load
from vlreg.testing.conformance import PublishedWidths


class TestNemotronHOmni(PublishedWidths):
    config = NemotronH_Omni_Reasoning_V3_Config
    checkpoint = "nemotron_h_omni"
    family = "nemotron"
    parts = {"wrapper": ("nemotron_h_omni", "vlreg-nemotron"), "text": ("nemotron_h", "vlreg-nemotron"),
             "vision": ("radio", "vlreg-nemotron")}
    published = {
        "vision.num_layers": 32, "vision.vision_hidden_size": 1280, "vision.num_heads": 16, "vision.head_dim": 80,
        "vision.intermediate_size": 5120, "vision.patch_size": 16, "vision.class_tokens": 10,
        "projector.linear_1.weight.shape": (4096, 4 * 1280),  # 2 x 2 patches a token
        "_module.config.text_config.layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
        "layers.0.mamba.num_heads": 128, "layers.0.mamba.head_dim": 64, "layers.0.mamba.num_groups": 8,
        "layers.0.mamba.state_size": 128, "layers.0.mamba.conv_dim": 10240,
        "layers.1.mlp.num_experts": 8, "layers.1.mlp.top_k": 2,
    }
    refused = None  # which of the scan's values are served depends on the release: the test below
    aliases = {"model": {"layers": "language_model.model.layers"}, "layers[0]": {"mamba": "mixer"},
               "vision": {"layers": "encoder.layer", "patch_embed": "embeddings"}}

    def test_one_sublayer_a_block_and_the_scans_values(self, model):
        """A block per kind the config lists; where transformers runs the scan inside
        mamba2_scan_forward (5.25, `Mamba.one_call`) its inner values are refused."""
        mixers = [[name for name in ("mamba", "self_attn", "mlp") if name in block.__dict__] for block in model.layers]
        assert mixers == [["mamba"], ["mlp"], ["self_attn"], ["mlp"]]
        mamba = model.layers[0].mamba
        assert isinstance(mamba, Mamba)
        rows = model.support()
        inside = ("time_steps", "decays", "state_output") if mamba.one_call else ()  # refused in transformers 5.25
        assert all((reason is None) != row.endswith(inside) for row, reason in rows.items() if ".mamba." in row)
        assert all(reason is None for row, reason in rows.items() if ".mamba." not in row)
        assert list(model.read_only()) == ["vision.image_token_mask", *(() if inside else ["layers.0.mamba.state_output"])]


def test_the_census_serves_it():
    assert "vlreg-nemotron" in coverage()["nemotron_h_omni"]


def test_an_audio_tower_is_built_and_left_unnamed(tmp_path):
    """The published checkpoint also carries a Parakeet audio tower; no standard name binds
    in it, and the names and support table are those of the same model without it."""
    for name, fields in (("with-audio", {"audio_config": {"projection_hidden_size": 4096, "projection_bias": False}}),
                         ("without", {})):
        NemotronH_Omni_Reasoning_V3_Config(**fields).save_pretrained(tmp_path / name)
        AutoProcessor.from_pretrained(build("nemotron_h_omni")).save_pretrained(tmp_path / name)
    with_audio, without = (load(tmp_path / name, dispatch=False) for name in ("with-audio", "without"))
    assert with_audio._module.audio_tower is not None and without._module.audio_tower is None
    assert with_audio._aliases == without._aliases
    assert with_audio.support() == without.support()
    inside = list(with_audio.audio_tower.modules())
    assert len(inside) > 100 and not [envoy for envoy in inside if envoy._aliases], "a standard name bound in the audio tower"
