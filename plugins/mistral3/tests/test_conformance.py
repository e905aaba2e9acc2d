"""Mistral 3 against the conformance suite the core ships.

Two images of different shapes (112 x 84 and 64 x 128) make the tower pad the smaller
one before its convolution and pack both into one row after it."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import PIXTRAL, composite


class TestMistral3(AnalysisConformance, VisionConformance):
    checkpoint = "mistral3"
    native = composite(PIXTRAL)
    image_sizes = ((112, 84), (64, 128))


class TestLightOnOcr(AnalysisConformance, VisionConformance):
    """LightOnOCR: the Pixtral tower under LightOnOCR's names on Qwen3 text; no row breaks
    in the prompt, and the projector reads the tower's output (every tower value writable)."""

    checkpoint = "lighton_ocr"
    native = composite(PIXTRAL, vision="model.vision_encoder", projector="model.vision_projection")
    image_sizes = ((112, 84), (64, 128))
