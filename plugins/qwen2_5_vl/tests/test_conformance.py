"""Qwen2.5-VL against the conformance suite the core ships, on images larger than a window."""

from vlreg.testing.conformance import VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per window on a windowed block"


class TestQwen2_5VL(VisionConformance):
    checkpoint = "qwen2_5_vl"
    native = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")
    unavailable = no_patterns(PER_CALL)
    # 112 x 168 pixels is 4 x 6 merge blocks: six 56-pixel windows, so the tower's
    # window order differs from the image tokens' order.
    image_sizes = ((112, 168), (168, 112))
    projector_output_is_features = False
