"""Janus against the conformance suite the core ships: its understanding path (the tower,
the aligner, the scatter into Llama's embeddings). ``vision.image_codes`` is refused on
every load: the VQ model encodes images only to generate them."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP, vision="model.vision_model", projector="model.aligner")


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


class TestDeepseekVLHybrid(AnalysisConformance, VisionConformance):
    """DeepSeek-VL-Hybrid: DeepSeek-VL's layout, with SAM's ViT beside SigLIP at
    ``vision.second_tower`` (the ``"sam_vit"`` adapter's envoys): its values are the tower's,
    a write to any of them reaches the logits; its windowed block's attention interior is per
    window, refused by name as on GOT-OCR 2.0."""

    checkpoint = "deepseek_vl_hybrid"
    on_disk = "vision.layers"
    native = NATIVE | {"vision.second_tower": "model.high_res_vision_model.vision_encoder",
                       "vision.second_tower.layers": "model.high_res_vision_model.vision_encoder.layers"}
    unavailable = {f"vision.second_tower.layers.0.self_attn.{name}": "attends within 6 x 6-patch windows" for name in (
        "attention_queries", "attention_keys", "attention_values", "attention_scores", "attention_probabilities",
        "attention_head_outputs")}
    image_sizes = ((84, 84), (112, 84))
