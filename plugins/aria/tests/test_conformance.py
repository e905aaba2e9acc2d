"""Aria against the conformance suite the core ships.

The default image (112 x 84) is one 980-pixel frame of 14 x 14 patches, read by 8 learned
queries: 8 image tokens. The text model's MLPs are experts beside shared experts.
"""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance

NATIVE = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
    "vision": "model.vision_tower",
    "vision.layers": "model.vision_tower.encoder.layers",
    "vision.patch_embed": "model.vision_tower.embeddings.patch_embedding",
    "vision.norm": "model.vision_tower.post_layernorm",
    "vision.layers.0.self_attn": "model.vision_tower.encoder.layers.0.self_attn",
    "vision.layers.0.input_layernorm": "model.vision_tower.encoder.layers.0.layer_norm1",
    "projector": "model.multi_modal_projector",
}


class TestAria(ExpertsConformance, AnalysisConformance, VisionConformance):
    """The queries' features reach the embeddings through ``inputs_embeds.masked_scatter``."""

    checkpoint = "aria"
    native = NATIVE
    down_proj_transposed = True  # each expert's down projection is [intermediate, hidden]
    processor_options = {"max_image_size": 490}  # a 490-pixel frame: 4 queries, not 8
    analysis_refuses = {"tower_patterns": "resampler"}
