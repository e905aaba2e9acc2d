"""DeepSeek-OCR 2 against the conformance suite the core ships, on images no larger than a
tile (one tower call: the global view; a tiled image's tower values are refused by name,
`test_deepseek_ocr2.py`). The tower's blocks are the query encoder's; the features are each
image's projected queries then the ``view_separator`` row, so ``projector.output`` is not
them. DeepSeek-V2's experts: softmax greedy routing, not renormalized."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.native import composite

#: The query encoder's names, from the tower (Qwen2's block names are the standard ones).
ENCODER = {
    "layers": "vision_encoder.layers",
    "layers.0.self_attn": "vision_encoder.layers.0.self_attn",
    "layers.0.mlp": "vision_encoder.layers.0.mlp",
    "layers.0.input_layernorm": "vision_encoder.layers.0.input_layernorm",
    "layers.1.post_attention_layernorm": "vision_encoder.layers.1.post_attention_layernorm",
}


class TestDeepseekOcr2(ExpertsConformance, AnalysisConformance, VisionConformance):
    """A 112 x 84 image and a 156 x 100 one, each within a 156-pixel tile: a global view of
    13 x 13 patches and 256 queries, 257 tokens with the separator."""

    checkpoint = "deepseek_ocr2"
    native = composite(ENCODER) | {"layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate"}
    renormalized = False  # softmax probabilities of the chosen experts, as they are (GreedyRoutedMoe.route)
    projector_output_is_features = False
    #: transformers' own forward fails with the whole tower on disk (it reads the query table's
    #: weight itself, not through a call accelerate loads it for): the blocks go there.
    on_disk = "vision.layers"
    image_sizes = ((112, 84), (156, 100))
    analysis_refuses = {"tower_patterns": "resampler"}  # the tokens are learned queries over the whole view


#: The CLIP encoder's names, from the tower.
CLIP_ON_SAM = {
    "layers": "vision_encoder.encoder.layers",
    "layers.0.self_attn": "vision_encoder.encoder.layers.0.self_attn",
    "layers.0.mlp": "vision_encoder.encoder.layers.0.mlp",
    "layers.0.input_layernorm": "vision_encoder.encoder.layers.0.layer_norm1",
    "layers.1.post_attention_layernorm": "vision_encoder.encoder.layers.1.layer_norm2",
}


class TestUnlimitedOcr(ExpertsConformance, AnalysisConformance, VisionConformance):
    """A 48 x 48 image and a 48 x 36 one, each within a 48-pixel tile: a global view of 4 x 4
    tokens, each row ended by a newline, then the separator: 21 tokens."""

    checkpoint = "unlimited_ocr"
    native = composite(CLIP_ON_SAM) | {"layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate"}
    renormalized = False
    projector_output_is_features = False
    on_disk = "vision.layers"
    image_sizes = ((48, 48), (48, 36))
    # every grid ends its rows with a newline token over no pixels, so none lies wholly on the image
    analysis_refuses = {"tower_patterns": "padding"}
