"""HyperCLOVA X SEED Vision against the conformance suite the core ships, on images larger than
a window: Qwen2.5-VL's tower (its pattern refused per window, as there), the projector after the
tower, Granite-shaped blocks whose identity scales each sublayer's output
(`vlreg.plugin.ScaledResidualLayer`), the embeddings read where the text model scales them, and
a video written at a scatter of its own."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite


class TestHyperCLOVAXVisionV2(AnalysisConformance, VisionConformance):
    checkpoint = "hyperclovax_vision_v2"
    native = composite(QWEN_VIT, vision="model.vision_model", projector="model.projector") | {
        "layers.0.post_attention_layernorm": "model.language_model.layers.0.post_attention_layernorm"}
    unavailable = no_patterns("once per window on a windowed block")
    # 112 x 168 pixels is 4 x 6 merge blocks: six 56-pixel windows, so the tower's window
    # order differs from the image tokens' order (the merger puts it back inside the tower).
    image_sizes = ((112, 168), (168, 112))
