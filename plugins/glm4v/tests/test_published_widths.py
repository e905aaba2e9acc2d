"""The GLM-V line at its published widths and full depth, built on the meta device (no
weights): the names, sizes and support table a real checkpoint of each gets.

Sources: transformers' default configs, whose docstrings name the checkpoint they describe
(``Glm4vConfig``: zai-org/GLM-4.1V-9B-Thinking; ``Glm4vMoeConfig``: zai-org/GLM-4.5V;
``GlmOcrConfig``: zai-org/GLM-OCR), where the defaults are those checkpoints' widths (the
coverage survey's §7 for the first two; GLM-OCR's as its docstring says, not checked here
against its config.json). One published field the defaults lack is written explicitly:
GLM-4.5V's ``head_dim`` of 128 (96 query heads of 128 over a 4096-wide stream, as its
config.json sets it), where the default would derive 4096 // 96 = 42.
"""

import pytest
import transformers
from transformers import AutoProcessor

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build
from vlreg_glm4v.text import GlmMoe


@pytest.fixture(scope="module")
def lazy(tmp_path_factory):
    processor = AutoProcessor.from_pretrained(build("glm4v"))  # the tiny one: nothing is processed on meta

    def load(config_class: str, **fields) -> StandardizedTransformer:
        folder = tmp_path_factory.mktemp(config_class)
        getattr(transformers, config_class)(**fields).save_pretrained(folder)
        processor.save_pretrained(folder)
        return StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")

    return load


def tower(model) -> tuple:
    vision = model.vision
    return (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
            vision.patch_size, vision.spatial_merge_size)


def test_glm4_1v_9b(lazy):
    model = lazy("Glm4vConfig")
    assert not model.dispatched and model.family.name == "glm4v"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (40, 4096, 32, 2, 128)
    assert model.intermediate_size == 13696 and model.vocab_size == 151552
    # the tower's MLPs are out_hidden_size wide; vision_config.intermediate_size (13696) is the merger's
    assert tower(model) == (24, 1536, 12, 128, 4096, 14, 2)
    rows = model.support()
    assert {row for row, why in rows.items() if why} == {"vision.self_attn.attention_scores",
                                                         "vision.self_attn.attention_probabilities",
                                                         "vision.video_features", "videos"}
    with pytest.raises(Unavailable, match="image_grid_thw"):
        model.vision.image_size


def test_glm4_5v_routes_to_8_of_128_experts_beside_a_shared_one(lazy):
    model = lazy("Glm4vMoeConfig", text_config={"head_dim": 128})
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (46, 4096, 96, 8, 128)
    assert type(model.layers[0].mlp).__name__ == "Mlp" and model.layers[0].mlp.intermediate_size == 10944
    routed = model.layers[1].mlp
    assert isinstance(routed, GlmMoe) and all(isinstance(block.mlp, GlmMoe) for block in model.layers[1:])
    assert (routed.num_experts, routed.top_k, routed.intermediate_size) == (128, 8, 1408)
    assert (routed.n_group, routed.topk_group, routed.routed_scaling_factor) == (1, 1, 1.0)
    assert routed.shared_experts.down_proj.weight.shape[1] == 1408
    with pytest.raises(Unavailable, match="differ"):  # the dense first block and the experts
        model.intermediate_size
    assert tower(model) == (24, 1536, 12, 128, 4096, 14, 2)
    rows = model.support()
    assert rows["layers.1-45.mlp.shared_expert_output"] is None and rows["layers.1-45.mlp.router_logits"] is None


def test_glm4_6v_takes_its_parts_by_model_type(lazy):
    """``Glm46VConfig``'s defaults are GLM-4.1V's parts (its docstring's checkpoint); given
    GLM-4.5V's text config, as the GLM-4.6V checkpoints pair it, it serves those blocks."""
    model = lazy("Glm46VConfig")
    assert model.family.name == "glm4v" and model.num_layers == 40 and tower(model)[0] == 24
    text = transformers.Glm4vMoeTextConfig(head_dim=128).to_dict()
    model = lazy("Glm46VConfig", text_config=text)
    assert model.family.parts["text"].model_type == "glm4v_moe_text" and model.num_layers == 46
    assert isinstance(model.layers[1].mlp, GlmMoe) and model.layers[1].mlp.num_experts == 128


def test_glm_ocr(lazy):
    model = lazy("GlmOcrConfig")
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (16, 1024, 16, 8, 64)
    assert model.intermediate_size == 4096 and model.vocab_size == 59392
    assert tower(model) == (24, 1024, 16, 64, 4096, 14, 2)
    assert "vision.position_embeddings" not in model.support()
