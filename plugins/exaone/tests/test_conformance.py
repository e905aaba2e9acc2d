"""EXAONE 4.5 against the conformance suite the core ships, on images larger than a window.

Its text blocks norm each sublayer's output, not its input: the suite finds the block a
plain sum of what its sublayers add (read at those norms). Its tower is Qwen2.5-VL's, so a
tower block's attention pattern is refused as there (one attention call per window or image);
`tower_patterns` computes each call's from the queries and the keys (repeated over their
groups: the tower is grouped-query)."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

PER_CALL = "once per window on a windowed block"


class TestExaone4_5(AnalysisConformance, VisionConformance):
    checkpoint = "exaone4_5"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": "model.visual",
        "vision.layers": "model.visual.blocks",
        "vision.patch_embed": "model.visual.patch_embed",
        "vision.layers.0.self_attn": "model.visual.blocks.0.attn",
        "vision.layers.0.mlp": "model.visual.blocks.0.mlp",
        "vision.layers.0.input_layernorm": "model.visual.blocks.0.norm1",
        "vision.layers.0.post_attention_layernorm": "model.visual.blocks.0.norm2",
        "layers.0.post_attention_layernorm": "model.language_model.layers.0.post_attention_layernorm",
        "projector": "model.visual.merger",
    }
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
    }
    # 112 x 168 pixels is 4 x 6 merge blocks: six 56-pixel windows, so the tower's window
    # order differs from the image tokens' order.
    image_sizes = ((112, 168), (168, 112))
    projector_output_is_features = False
