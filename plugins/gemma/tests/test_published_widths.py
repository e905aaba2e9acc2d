"""The Gemma families at published widths and full depth, built on the meta device (no
weights), and `vlreg inspect` of each config alone.

PaliGemma's, Gemma 4's, Gemma 4 unified's and Gemma 3n's are transformers' default configs
(PaliGemma 3B at 224 pixels; Gemma 4 "similar to google/gemma-4-e2b-it", with the default
Gemma 4 tower and audio tower; Gemma 4 unified with its default embedder; Gemma 3n's,
gemma-3n-E4B's widths with its 300M MobileNetV5 and audio tower). Gemma 3's default config pairs
a 224-pixel SigLIP with 256 tokens, which is no published geometry, so Gemma 3 is
gemma-3-4b-it's config, its fields written out here; ShieldGemma 2's default config is
Gemma 3's defaults too, and shieldgemma-2-4b-it is trained from gemma-3-4b-it, so it is those
fields under a ShieldGemma2Config. The tiny checkpoints' processors stand in: nothing is
processed on meta."""

import json

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer, Unavailable
from vlreg.cli import main
from vlreg.testing import build
from vlreg_gemma.geometry import square_grids

GEMMA3_4B = {
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34, "num_attention_heads": 8,
                    "num_key_value_heads": 4, "head_dim": 256, "query_pre_attn_scalar": 256, "sliding_window": 1024,
                    "vocab_size": 262208},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                      "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
                      "vision_use_head": False},
    "mm_tokens_per_image": 256,
}
CONFIGS = {
    "gemma3": lambda: transformers.Gemma3Config(**GEMMA3_4B),
    "shieldgemma2": lambda: transformers.ShieldGemma2Config(**GEMMA3_4B),
    "paligemma": lambda: transformers.PaliGemmaConfig(),
    "gemma4": lambda: transformers.Gemma4Config(vision_config=transformers.Gemma4VisionConfig(),
                                                audio_config=transformers.Gemma4AudioConfig()),
    "gemma4_unified": lambda: transformers.Gemma4UnifiedConfig(vision_config=transformers.Gemma4UnifiedVisionConfig()),
    "gemma3n": lambda: transformers.Gemma3nConfig(),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}
    for name, config in CONFIGS.items():
        made[name] = tmp_path_factory.mktemp(name)
        config().save_pretrained(made[name])
    return made


@pytest.fixture(scope="module")
def lazy(folders, tmp_path_factory):
    def load(name):
        processor = tmp_path_factory.mktemp(f"{name}-processor")
        AutoProcessor.from_pretrained(build(name)).save_pretrained(processor)
        return StandardizedTransformer(str(folders[name]), task="image-text-to-text", dispatch=False,
                                       attn_implementation="eager", processor=str(processor))

    return load


def vision_sizes(vision):
    return (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
            vision.patch_size)


@pytest.mark.parametrize("name", ["gemma3", "shieldgemma2"])
def test_gemma3_4b_pools_4096_patches_to_256_tokens(lazy, name):
    model = lazy(name)
    assert not model.dispatched
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (34, 2560, 8, 4, 256)
    assert vision_sizes(model.vision) == (27, 1152, 16, 72, 4304, 14) and model.vision.image_size == 896
    assert model.family.parts["vision"].model_type == "siglip_vision_model"
    declare = square_grids(model._module.config)
    (grid,) = declare(None, [type("Image", (), {"size": (1280, 720)})()], model.processor)
    assert (grid.rows, grid.columns, grid.fold) == (16, 16, 4)  # 64 x 64 patches, pooled 4 x 4
    rows = model.support()
    assert all(rows[row] is None for row in rows)


def test_paligemma_3b_is_a_token_per_patch(lazy):
    model = lazy("paligemma")
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (18, 2048, 8, 1, 256)
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_size, vision.image_size) == (27, 1152, 14, 224)
    assert model._module.config.text_config.num_image_tokens == 256
    assert model.projector.linear.weight.shape == (2048, 1152)
    assert "bidirectional over the prefix" in type(model.layers[0].self_attn).attention_probabilities.description


def test_gemma4_e2b_like_text_and_the_default_tower(lazy):
    model = lazy("gemma4")
    config = model._module.config.text_config
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == (30, 2304, 8, 4)
    full = [i for i, kind in enumerate(config.layer_types) if kind == "full_attention"]
    assert full == [5, 11, 17, 23, 29]
    assert model.layers[0].self_attn.head_dim == 256 and model.layers[5].self_attn.head_dim == 512  # global heads
    with pytest.raises(Unavailable, match=r"head_dim is unavailable: the blocks. self_attns differ in it \(256 on blocks \[0, 1, .*512 on blocks \[5, 11, 17, 23, 29\]\); read each block.s self_attn.head_dim"):
        model.head_dim
    assert vision_sizes(model.vision) == (16, 768, 12, 64, 3072, 16)
    rows = model.support()
    assert rows["per_layer_output"] is None and rows["vision.position_embeddings"] is None
    assert rows["vision.self_attn.attention_probabilities"] is None
    assert model.vision.padded_patches
    audio = model.model.audio_tower  # served by no part: no standard names bind in it
    assert not audio._aliases and not any(block._aliases for block in audio.layers)
    assert not [row for row in rows if "audio" in row]


def test_gemma4_unified_has_no_tower(lazy):
    model = lazy("gemma4_unified")
    assert model.vision.num_layers == 0 and model.vision.vision_hidden_size == 3840 and model.vision.patch_size == 48
    rows = model.support()
    assert not [row for row in rows if row.startswith("vision.") and "attention" in row]
    assert rows["vision.patch_embeddings"] is None and rows["vision.image_features"] is None


def test_gemma3n_e4b_four_streams_and_the_300m_mobilenet(lazy):
    model = lazy("gemma3n")
    config = model._module.config
    text, vision = config.text_config, model.vision
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (
        35, 2048, 8, 2, 256)
    assert {(block.num_streams, block.active_stream) for block in model.layers} == {(4, 0)}
    assert text.num_kv_shared_layers == 15 and text.activation_sparsity_pattern[:10] == [0.95] * 10
    assert config.vision_config.architecture == "mobilenetv5_300m_enc"
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_embedding_size) == (0, 2048, 64)
    assert config.vision_soft_tokens_per_image == 256
    assert vision.patch_embed._module is vision.timm_model.conv_stem._module
    assert model.projector.embedding_projection.weight.shape == (2048, 2048)
    rows = model.support()
    assert rows["per_layer_output"] is None and rows["layer_streams"] is None and rows["vision.tower_output"] is None
    assert [row for row in rows if "audio" in row] == ["audio"] and "audio tower" in rows["audio"]
    assert model.family.unserved == {"audio_config": "gemma3n_audio"}
    with pytest.raises(Unavailable, match="MobileNetV5"):
        model.vision.num_heads


@pytest.mark.parametrize("name", list(CONFIGS))
def test_inspect_reads_the_config_alone(folders, capsys, name):
    assert main(["inspect", str(folders[name]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "gemma"
    assert report["parts"]["wrapper"]["model_type"] == name
    assert report["parts"]["wrapper"]["plugin"].startswith("plugin 'gemma' (vlreg-gemma")
    assert report["support"]["vision.image_features"] is None
    vision = report["vision sizes"]
    if name in ("gemma4_unified", "gemma3n"):
        assert vision["num_layers"] == 0 and vision["num_heads"] is None
        assert "vision.layers[0]" not in report["aliases"]
    else:
        assert vision["num_layers"] > 0 and report["aliases"]["vision"]["layers"] == "encoder.layers"
