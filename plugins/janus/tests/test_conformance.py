"""Janus against the conformance suite the core ships: its understanding path (the tower,
the aligner, the scatter into Llama's embeddings). ``vision.image_codes`` is refused on
every load: the VQ model encodes images only to generate them."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

NATIVE = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
    "vision": "model.vision_model",
    "projector": "model.aligner",
    "vision.layers": "model.vision_model.encoder.layers",
    "vision.patch_embed": "model.vision_model.embeddings.patch_embedding",
    "vision.norm": "model.vision_model.post_layernorm",
    "vision.layers.0.self_attn": "model.vision_model.encoder.layers.0.self_attn",
    "vision.layers.0.mlp": "model.vision_model.encoder.layers.0.mlp",
    "vision.layers.0.input_layernorm": "model.vision_model.encoder.layers.0.layer_norm1",
    "vision.layers.0.post_attention_layernorm": "model.vision_model.encoder.layers.0.layer_norm2",
}


class TestJanus(AnalysisConformance, VisionConformance):
    """A square image (8 x 8 tokens, every one over the image), then a 112 x 84 one padded
    to a square (its top and bottom rows of tokens over padding alone): the analysis runs
    on the first, the two-invoke tests take both. `vlreg.analysis.tower_patterns` refuses
    an image whose only grid holds padding (`test_janus.py`)."""

    checkpoint = "janus"
    native = NATIVE
    unavailable = {"vision.image_codes": "only to generate images"}
    image_sizes = ((84, 84), (112, 84))


class TestDeepseekVL(AnalysisConformance, VisionConformance):
    """DeepSeek-VL: the same layout over transformers' SigLIP (its pooling head on, reaching
    nothing) and a Llama text model, both served by vlreg-llava; nothing refused."""

    checkpoint = "deepseek_vl"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = NATIVE
    image_sizes = ((84, 84), (112, 84))
