"""The Qwen3 line against the conformance suite the core ships."""

from vlreg.testing.conformance import ExpertsConformance, LinearAttentionConformance, VisionConformance

PER_CALL = "once per image"
QWEN = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
    "vision": "model.visual",
    "vision.layers": "model.visual.blocks",
    "vision.patch_embed": "model.visual.patch_embed",
    "vision.layers.0.self_attn": "model.visual.blocks.0.attn",
    "vision.layers.0.input_layernorm": "model.visual.blocks.0.norm1",
    "projector": "model.visual.merger",
}


class TestQwen3VL(VisionConformance):
    checkpoint = "qwen3_vl"
    native = QWEN
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
        "layers.2.deepstack_output": "feed layers[0] to layers[1] only",
    }
    image_sizes = ((112, 84), (64, 128))


class TestQwen3VLMoe(ExpertsConformance, TestQwen3VL):
    """Qwen3-VL with every text MLP routing each token to 2 of 4 experts."""

    checkpoint = "qwen3_vl_moe"
    unavailable = {**TestQwen3VL.unavailable, "mlp.shared_expert_output": "no shared expert"}


class TestQwen3_5(LinearAttentionConformance, TestQwen3VL):
    """Linear, full, linear text blocks; a tower with learned positions and no DeepStack."""

    checkpoint = "qwen3_5"
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
        "vision.deepstack_features": "no DeepStack taps",
    }


class TestQwen3_5Moe(ExpertsConformance, TestQwen3_5):
    """Qwen3.5 whose MLPs route each token to 2 of 4 experts beside a gated shared expert."""

    checkpoint = "qwen3_5_moe"
