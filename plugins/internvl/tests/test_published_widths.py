"""InternVL at the widths transformers' default config carries (InternVL3's: the
InternViT-300M tower, 448-pixel tiles of 14-pixel patches, a 2 x 2 pixel shuffle), built
on the meta device at full depth (no weights), and `vlreg inspect` of that config."""

import json

import pytest
from transformers import AutoProcessor, InternVLConfig

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("internvl-default")
    InternVLConfig().save_pretrained(path)
    return path


def test_the_published_tower_on_meta(folder, tmp_path):
    AutoProcessor.from_pretrained(build("internvl")).save_pretrained(tmp_path)  # nothing is processed on meta
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager",
                                    processor=str(tmp_path))
    assert not model.dispatched
    vision = model.vision
    sizes = (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
             vision.patch_size, vision.image_size, vision.class_tokens)
    assert sizes == (24, 1024, 16, 64, 4096, 14, 448, 1)
    assert model.family.parts["text"].model_type == "qwen2"
    projector = model.projector
    assert projector.linear_1.weight.shape == (model.hidden_size, 4 * 1024)  # 2 x 2 patches a token
    assert model._module.config.image_seq_length == (448 // 14 // 2) ** 2 == 256
    assert list(model.read_only()) == ["vision.image_token_mask"]  # the tower's output is what the projector reads
    assert model.support()["vision.self_attn.attention_probabilities"] is None


def test_inspect_reads_the_config_alone(folder, capsys):
    assert main(["inspect", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "internvl" and report["class"] == "InternVLForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == "internvl_vision"
    assert report["parts"]["vision"]["plugin"].startswith("plugin 'internvl' (vlreg-internvl")
    assert report["aliases"]["model"]["vision"] == "model.vision_tower"
    assert report["aliases"]["vision"] == {"patch_embed": "embeddings.patch_embeddings.projection", "layers": "encoder.layer"}
    assert report["aliases"]["vision.layers[0]"] == {
        "self_attn": "attention", "input_layernorm": "layernorm_before", "post_attention_layernorm": "layernorm_after",
    }
    vision = report["vision sizes"]
    assert (vision["num_layers"], vision["vision_hidden_size"], vision["patch_size"], vision["image_size"]) == (24, 1024, 14, 448)
    assert report["support"]["vision.image_features"] is None
    assert report["support"]["vision.self_attn.attention_output"] is None
