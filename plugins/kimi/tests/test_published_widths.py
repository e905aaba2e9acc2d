"""Kimi K2.5 at transformers' default widths, built on the meta device (no weights).

``Kimi_K25Config()`` is the class's defaults, read from it: the tower is Kimi's (27 blocks,
1152 wide, 16 heads, 14-pixel patches gathered 2 x 2), the text model ``DeepseekV3Config``'s
defaults (DeepSeek-V3's widths: 61 blocks, 7168 wide, 128 heads of latent attention over a
512-wide key-value latent and a 1536-wide query latent, three dense blocks, then 8 of 256
experts in 8 groups). The published Kimi K2.5's text config differs (64 heads, 384
experts, one dense block); none was at hand to check here.
"""

import transformers

from vlreg.plugin import GroupRoutedMoe, LatentAttention
from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestKimiK25(PublishedWidths):
    config = transformers.Kimi_K25Config
    checkpoint = "kimi_k25"
    family = "kimi"
    parts = {"text": ("deepseek_v3", "vlreg-text"), "vision": ("kimi_k25_vision", "vlreg-kimi")}
    published = {
        "num_layers": 61, "hidden_size": 7168, "num_heads": 128, "num_kv_heads": 128, "head_dim": 128,
        "qk_head_dim": 192, "layers.0.self_attn.kv_lora_rank": 512, "layers.0.self_attn.q_lora_rank": 1536,
        "layers.0.self_attn.qk_rope_head_dim": 64, "layers.0.mlp.intermediate_size": 18432,
        "layers.3.mlp.num_experts": 256, "layers.3.mlp.top_k": 8, "layers.3.mlp.intermediate_size": 2048,
        "layers.3.mlp.n_group": 8, "layers.3.mlp.topk_group": 4, "layers.3.mlp.routed_scaling_factor": 2.5,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
        "projector.in_proj.weight.shape": (4608, 4608),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask"]

    def test_latent_attention_and_the_routed_blocks(self, model):
        assert all(isinstance(block.self_attn, LatentAttention) for block in model.layers)
        assert not any(isinstance(block.mlp, GroupRoutedMoe) for block in model.layers[:3])
        assert all(isinstance(block.mlp, GroupRoutedMoe) for block in model.layers[3:])
