"""Muse Glimmer and Muse Spark against the conformance suite the core ships: their tower's
windowed, per-call attention serves no one pattern (`tower_patterns` computes each call's); the
projector vlreg serves (``model.vision_adapter``) is followed by a projection and a norm before
the scatter. Spark's blocks state their own identity (gated residuals), its experts route by a
sigmoid and run in a narrower space."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import composite

#: The Muse tower's names, from the tower.
MUSE_TOWER = {
    "layers": "layers",
    "layers.0.self_attn": "layers.0.attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.norm1",
    "layers.0.post_attention_layernorm": "layers.0.norm2",
}


class TestMuseGlimmer(AnalysisConformance, VisionConformance):
    checkpoint = "muse_glimmer"
    native = composite(MUSE_TOWER, projector="model.vision_adapter") | {
        "layers.0.self_attn.gate_proj": "model.language_model.layers.0.self_attn.gate_proj",
        "layers.1.post_feedforward_layernorm": "model.language_model.layers.1.post_feedforward_layernorm",
    }
    unavailable = no_patterns("once per image")
    projector_output_is_features = False  # vision_projection and perception_emb_norm follow it
    # transformers' Muse processor writes a video's prompt from its metadata, returned only when asked
    video_options = {"return_metadata": True}
    # 112 x 84 is 4 x 3 tokens in windows of 2 x 2 patches; 300 x 100 is stretched to 6 x 2 tokens
    image_sizes = ((112, 84), (300, 100))


class TestMuseSpark(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "muse_spark"
    native = composite(MUSE_TOWER, projector="model.vision_adapter") | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.1.post_attention_residual_gate": "model.language_model.layers.1.post_attention_residual_gate",
    }
    unavailable = no_patterns("once per image") | {
                                                   "layers.1.mlp.shared_expert_output": "no shared expert"}
    projector_output_is_features = False  # vision_projection and perception_emb_norm follow it
    # transformers' Muse processor writes a video's prompt from its metadata, returned only when asked
    video_options = {"return_metadata": True}
    renormalized = False  # sigmoid scores renormalized and scaled (SparkMoe.route)
    image_sizes = ((112, 84), (300, 100))
