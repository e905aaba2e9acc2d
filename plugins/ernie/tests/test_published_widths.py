"""ERNIE 4.5-VL-MoE at transformers 5.23's default widths, built on the meta device (no weights).

``Ernie4_5_VLMoeConfig()`` is ERNIE-4.5-VL-28B-A3B's (the class's docstring names that
checkpoint): 28 text blocks 2560 wide, 20 query heads over 4 key heads of 128, block 0 dense
(12288 wide), the others two banks of 64 experts, 6 a token, the text bank's 1536 wide and the
vision bank's 512, beside two shared experts (3072 wide together); the Qwen ViT of 32 blocks,
1280 wide, 16 heads, 14-pixel patches folded 2 x 2 by the resampler."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestErnie4_5_VLMoe(PublishedWidths):
    config = transformers.Ernie4_5_VLMoeConfig
    checkpoint = "ernie4_5_vl_moe"
    family = "ernie"
    parts = {"text": ("ernie4_5_vl_moe_text", "vlreg-ernie"), "vision": ("ernie4_5_vl_moe_vision", "vlreg-ernie")}
    published = {
        "num_layers": 28, "hidden_size": 2560, "num_heads": 20, "num_kv_heads": 4, "head_dim": 128,
        "layers.0.mlp.intermediate_size": 12288,
        "layers.1.mlp.text_experts.num_experts": 64, "layers.1.mlp.text_experts.top_k": 6,
        "layers.1.mlp.text_experts.intermediate_size": 1536, "layers.1.mlp.vision_experts.intermediate_size": 512,
        "layers.1.mlp.shared_experts.intermediate_size": 3072,
        "vision.num_layers": 32, "vision.vision_hidden_size": 1280, "vision.num_heads": 16, "vision.head_dim": 80,
        "vision.intermediate_size": 5120, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = None
