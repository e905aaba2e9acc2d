"""VideoLLaMA 3 against the conformance suite the core ships: a packed SigLIP tower attending
once per image (its pattern refused, as the Qwen ViT's), a token a patch, the projector outside
the tower, and a video written at a scatter of its own."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import SIGLIP, composite

PER_CALL = "once per image"


class TestVideoLlama3(AnalysisConformance, VisionConformance):
    checkpoint = "video_llama_3"
    native = composite(SIGLIP, vision="model.vision_model", projector="model.projector")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (56, 98))
