"""Kimi K2.5 against the conformance suite the core ships: its tower's per-image attention
serves no one pattern (`tower_patterns` computes each call's), DeepSeek-V3's experts route
by the sigmoid within the best groups."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import composite

#: The Kimi tower's names, from the tower.
KIMI_TOWER = {
    "layers": "layers",
    "patch_embed": "patch_embed",
    "layers.0.self_attn": "layers.0.attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.norm1",
    "layers.0.post_attention_layernorm": "layers.0.norm2",
}


class TestKimiK25(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "kimi_k25"
    native = composite(KIMI_TOWER, projector="model.mm_projector") | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.0.self_attn.kv_a_layernorm": "model.language_model.layers.0.self_attn.kv_a_layernorm",
    }
    unavailable = no_patterns("once per image")
    renormalized = False  # sigmoid scores within the best groups, renormalized and scaled (GroupRoutedMoe.route)
    # a chunk of 4 frames pooled into one grid, then a chunk of the fifth alone
    pooled_video_chunks, video_frames = True, (56, 56, 5)
    # 112 x 84 is 4 x 3 tokens; 300 x 100 pads its height to 112 (its last row of tokens half over padding)
    image_sizes = ((112, 84), (300, 100))
