"""Cosmos3 Edge against the conformance suite the core ships: a packed SigLIP 2 tower attending
once per image (its pattern refused, as the Qwen ViT's), its learned positions resampled per
image, the projector outside the tower, and a video written at a scatter of its own."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import SIGLIP, composite

PER_CALL = "once per image"


class TestCosmos3Edge(AnalysisConformance, VisionConformance):
    checkpoint = "cosmos3_edge"
    native = composite(SIGLIP, vision="model.visual", projector="model.projector")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (64, 96))
    video_frames = (64, 64, 2)
    # the embeddings read their position table's weight directly (no module call), which
    # accelerate leaves on the meta device when the tower is offloaded: transformers' own
    # forward cannot run so, so the blocks go to disk instead
    on_disk = "vision.layers"
