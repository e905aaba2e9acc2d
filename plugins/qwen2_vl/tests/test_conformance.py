"""Qwen2-VL against the conformance suite the core ships."""

import torch

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per image"


class TestQwen2VL(AnalysisConformance, VisionConformance):
    checkpoint = "qwen2_vl"
    native = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (56, 112))
    processor_options = {"max_pixels": 56 * 56}


class TestQwen2VLBfloat16(TestQwen2VL):
    """The same suite on a bfloat16 load: every identity holds at bfloat16's precision."""

    load_options = {"dtype": torch.bfloat16}
