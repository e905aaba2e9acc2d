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

from vlreg import Unavailable
from vlreg.testing.conformance import PublishedWidths
from vlreg.plugin import GroupRoutedMoe


PER_CALL = "once per image"
REFUSED = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
#: the tower: its MLPs are out_hidden_size wide; vision_config.intermediate_size (13696) is the merger's
TOWER = {"vision.num_layers": 24, "vision.vision_hidden_size": 1536, "vision.num_heads": 12, "vision.head_dim": 128,
         "vision.intermediate_size": 4096, "vision.patch_size": 14, "vision.spatial_merge_size": 2}


class TestGlm41V9B(PublishedWidths):
    config = transformers.Glm4vConfig
    checkpoint = "glm4v"
    family = "glm4v"
    parts = {"text": ("glm4v_text", "vlreg-glm4v"), "vision": ("glm4v_vision", "vlreg-glm4v")}
    published = {"num_layers": 40, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 2, "head_dim": 128,
                 "intermediate_size": 13696, "vocab_size": 151552, **TOWER}
    refused = REFUSED
    read_only = ["vision.image_token_mask"]

    def test_the_image_size_is_each_images(self, model):
        with pytest.raises(Unavailable, match="image_grid_thw"):
            model.vision.image_size


class TestGlm45V(PublishedWidths):
    """GLM-4.5V: a dense first block, then 8 of 128 experts beside a shared one."""

    config = transformers.Glm4vMoeConfig
    fields = {"text_config": {"head_dim": 128}}
    checkpoint = "glm4v"
    family = "glm4v"
    parts = {"text": ("glm4v_moe_text", "vlreg-glm4v"), "vision": ("glm4v_moe_vision", "vlreg-glm4v")}
    published = {"num_layers": 46, "hidden_size": 4096, "num_heads": 96, "num_kv_heads": 8, "head_dim": 128,
                 "layers.0.mlp.intermediate_size": 10944, "layers.1.mlp.num_experts": 128, "layers.1.mlp.top_k": 8,
                 "layers.1.mlp.intermediate_size": 1408, "layers.1.mlp.n_group": 1, "layers.1.mlp.topk_group": 1,
                 "layers.1.mlp.routed_scaling_factor": 1.0, "layers.1.mlp.shared_experts.down_proj.weight.shape": (4096, 1408),
                 **TOWER}
    refused = REFUSED

    def test_the_dense_first_block_and_the_routed_rest(self, model):
        assert type(model.layers[0].mlp).__name__ == "Mlp"
        assert all(isinstance(block.mlp, GroupRoutedMoe) for block in model.layers[1:])
        with pytest.raises(Unavailable, match="differ"):  # the dense first block and the experts
            model.intermediate_size
        rows = model.support()
        assert rows["layers.1-45.mlp.shared_expert_output"] is None and rows["layers.1-45.mlp.router_logits"] is None


class TestGlm46V(PublishedWidths):
    """``Glm46VConfig``'s defaults are GLM-4.1V's parts (its docstring's checkpoint)."""

    config = transformers.Glm46VConfig
    checkpoint = "glm4v"
    family = "glm4v"
    parts = TestGlm41V9B.parts
    published = {"num_layers": 40, "vision.num_layers": 24}
    refused = REFUSED


class TestGlm46VOnGlm45VText(TestGlm46V):
    """Given GLM-4.5V's text config, as the GLM-4.6V checkpoints pair it, it serves those blocks."""

    fields = {"text_config": transformers.Glm4vMoeTextConfig(head_dim=128).to_dict()}
    parts = {"text": ("glm4v_moe_text", "vlreg-glm4v")}
    published = {"num_layers": 46, "layers.1.mlp.num_experts": 128}

    def test_the_routed_blocks(self, model):
        assert isinstance(model.layers[1].mlp, GroupRoutedMoe)


class TestGlmOcr(PublishedWidths):
    config = transformers.GlmOcrConfig
    checkpoint = "glm4v"
    family = "glm4v"
    published = {"num_layers": 16, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 8, "head_dim": 64,
                 "intermediate_size": 4096, "vocab_size": 59392, **TOWER, "vision.vision_hidden_size": 1024,
                 "vision.num_heads": 16, "vision.head_dim": 64}
    refused = REFUSED

    def test_no_learned_positions(self, model):
        assert "vision.position_embeddings" not in model.support()


class TestGlm5Next(PublishedWidths):
    """GLM-5-Next (``Glm5NextConfig``'s defaults, zai-org/GLM-5.3-Flash): 45 blocks, three
    linear (KDA) blocks then one of DSA-indexed latent attention, four streams."""

    config = transformers.Glm5NextConfig
    checkpoint = "glm5_next"
    family = "glm4v"
    parts = {"text": ("glm5_next_text", "vlreg-glm4v"), "vision": ("glm5_next_vision", "vlreg-glm4v")}
    published = {"num_layers": 45, "hidden_size": 4096, "vocab_size": 154880, "layers.3.self_attn.num_heads": 64,
                 "layers.3.self_attn.head_dim": 256, "layers.3.self_attn.kv_lora_rank": 512,
                 "layers.3.self_attn.q_lora_rank": 1536, "layers.0.linear_attn.num_value_heads": 64,
                 "layers.0.linear_attn.key_head_dim": 128, "layers.0.num_streams": 4,
                 "layers.0.mlp.intermediate_size": 12288, "layers.3.mlp.num_experts": 288, "layers.3.mlp.top_k": 8,
                 **TOWER, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64}
    refused = REFUSED

    def test_the_mixers_by_kind(self, model):
        kinds = model.support()
        assert type(model.layers[0].linear_attn).__name__ == "KimiDeltaAttention"
        assert "self_attn" not in model.layers[0].__dict__ and "linear_attn" not in model.layers[3].__dict__
        assert model.layers[3].self_attn.reused_by() == []  # the defaults run an indexer on every indexed block
        assert any(row.endswith("self_attn.selected_keys") for row in kinds)
