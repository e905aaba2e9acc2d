"""Mistral 3 against the conformance suite the core ships.

Two images of different shapes (112 x 84 and 64 x 128) make the tower pad the smaller
one before its convolution and pack both into one row after it."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance


class TestMistral3(AnalysisConformance, VisionConformance):
    checkpoint = "mistral3"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": "model.vision_tower",
        "vision.layers": "model.vision_tower.transformer.layers",
        "vision.patch_embed": "model.vision_tower.patch_conv",
        "vision.layers.0.self_attn": "model.vision_tower.transformer.layers.0.attention",
        "vision.layers.0.mlp": "model.vision_tower.transformer.layers.0.feed_forward",
        "vision.layers.0.input_layernorm": "model.vision_tower.transformer.layers.0.attention_norm",
        "vision.layers.0.post_attention_layernorm": "model.vision_tower.transformer.layers.0.ffn_norm",
        "projector": "model.multi_modal_projector",
    }
    image_sizes = ((112, 84), (64, 128))


class TestLightOnOcr(AnalysisConformance, VisionConformance):
    """LightOnOCR: the Pixtral tower under LightOnOCR's names on Qwen3 text; no row breaks
    in the prompt, and the projector reads the tower's output (every tower value writable)."""

    checkpoint = "lighton_ocr"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": "model.vision_encoder",
        "vision.layers": "model.vision_encoder.transformer.layers",
        "vision.patch_embed": "model.vision_encoder.patch_conv",
        "vision.layers.0.self_attn": "model.vision_encoder.transformer.layers.0.attention",
        "vision.layers.0.mlp": "model.vision_encoder.transformer.layers.0.feed_forward",
        "vision.layers.0.input_layernorm": "model.vision_encoder.transformer.layers.0.attention_norm",
        "vision.layers.0.post_attention_layernorm": "model.vision_encoder.transformer.layers.0.ffn_norm",
        "projector": "model.vision_projection",
    }
    image_sizes = ((112, 84), (64, 128))
