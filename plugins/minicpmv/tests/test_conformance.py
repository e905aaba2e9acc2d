"""The MiniCPM-V line against the conformance suite the core ships."""

from vlreg.testing.conformance import AnalysisConformance, LinearAttentionConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import SIGLIP, composite

MINICPMV = composite(SIGLIP, vision="model.vision_tower", projector="model.merger")


class TestMiniCPMV4_6(AnalysisConformance, LinearAttentionConformance, VisionConformance):
    """A 112 x 84 image: a source image and 2 x 2 slices, 2 x 2 tokens each; the tower's
    block 0 on the patches, block 1 on the grid the vit_merger halved."""

    checkpoint = "minicpmv4_6"
    native = MINICPMV
    unavailable = no_patterns("once per slice")
    on_disk = "vision.layers"  # the tower's forward runs its blocks itself, its own weights kept in memory


class TestMiniCPMV4_7(TestMiniCPMV4_6):
    """MiniCPM-V 4.6's modules under 4.7's classes, its Canvas M-RoPE positions computed from
    the processor's token types and the markers' ids in its config."""

    checkpoint = "minicpmv4_7"


class TestMiniCPMOcr(TestMiniCPMV4_6):
    """MiniCPM-OCR's ``"4x"`` mode: no merge mid-tower, both blocks on the patches, 2 x 2
    patches a token (4 x 4 tokens a slice)."""

    checkpoint = "minicpm_ocr"
