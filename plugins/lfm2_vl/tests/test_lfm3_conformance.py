"""LFM3-VL against the conformance suite the core ships.

Both its text model and its tower are hybrids: a block's mixer is attention or a short
convolution (1-D over the text, 2-D over each image's grid of patches), held under its
kind's standard name (``self_attn``, ``short_conv``); the suite checks every block's identity,
``input + attention_output + mlp_output == layer_output``, whichever mixer it holds. The
text blocks add each sublayer's normed output (read at ``post_operator_norm`` and
``post_ffn_norm``). The tower attends once per image (`PerImageAttention`), so a tower
block's attention pattern is refused as on the Qwen ViT; `tower_patterns` computes each
call's from the queries and the keys."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

PER_CALL = "once per image"

NATIVE = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.embedding_norm",
    "lm_head": "lm_head",
    "vision": "model.vision_tower",
    "vision.layers": "model.vision_tower.layers",
    "vision.patch_embed": "model.vision_tower.patch_embed",
    "vision.layers.0.short_conv": "model.vision_tower.layers.0.conv",
    "vision.layers.1.self_attn": "model.vision_tower.layers.1.self_attn",
    "vision.layers.0.mlp": "model.vision_tower.layers.0.feed_forward",
    "layers.0.short_conv": "model.language_model.layers.0.conv",
    "layers.1.self_attn": "model.language_model.layers.1.self_attn",
    "layers.0.mlp": "model.language_model.layers.0.feed_forward",
    "layers.0.post_operator_norm": "model.language_model.layers.0.post_operator_norm",
    "projector": "model.multi_modal_projector",
}


class TestLfm3Vl(AnalysisConformance, VisionConformance):
    checkpoint = "lfm3_vl"
    native = NATIVE
    o_proj = "o_proj"
    tower_o_proj = "out_proj"
    unavailable = {
        "vision.layers.1.self_attn.attention_scores": PER_CALL,
        "vision.layers.1.self_attn.attention_probabilities": PER_CALL,
    }
    image_sizes = ((112, 84), (84, 140))
