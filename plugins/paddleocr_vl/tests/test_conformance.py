"""PaddleOCR-VL against the conformance suite the core ships: a packed SigLIP tower attending
once per image (its pattern refused, as the Qwen ViT's), its patches in raster order, its
learned positions resampled per image, the projector outside the tower; no videos."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import SIGLIP, composite

PER_CALL = "once per image"


class TestPaddleOCRVL(AnalysisConformance, VisionConformance):
    checkpoint = "paddleocr_vl"
    native = composite(SIGLIP, vision="model.visual.vision_model", projector="model.projector")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (56, 112))
    # the embeddings read their position table's weight directly (no module call), which
    # accelerate leaves on the meta device when the tower is offloaded: the blocks go to disk
    on_disk = "vision.layers"
