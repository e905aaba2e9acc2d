"""Ovis 2 against the conformance suite the core ships."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance


class TestOvis2(AnalysisConformance, VisionConformance):
    checkpoint = "ovis2"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": "model.vision_tower",
        "vision.layers": "model.vision_tower.transformer.encoder.layers",
        "vision.patch_embed": "model.vision_tower.transformer.embeddings.patch_embedding",
        "vision.layers.0.self_attn": "model.vision_tower.transformer.encoder.layers.0.attention",
        "vision.layers.0.mlp": "model.vision_tower.transformer.encoder.layers.0.ffn",
        "vision.layers.0.input_layernorm": "model.vision_tower.transformer.encoder.layers.0.rms_norm1",
        "projector": "model.visual_embeddings_table",
    }
    image_sizes = ((112, 84),)
    # the table is called on the features, then on the structure tokens' ids
    projector_feature_calls = slice(0, 1)
    rewritten_tokens = "visual_indicator_token_ids"
