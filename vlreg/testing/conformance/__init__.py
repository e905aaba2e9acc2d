"""The conformance suite a family's tests subclass.

    from vlreg.testing.conformance import VisionConformance

    class TestQwen2VL(VisionConformance):
        checkpoint = "qwen2_vl"
        native = {"layers": "model.language_model.layers", "vision": "model.visual"}

Every ``test_*`` method then runs against that family's checkpoint, loaded through
``from_pretrained`` as a user's would be. Requires pytest.
"""

from .analysis import AnalysisConformance
from .cross import CrossAttentionConformance
from .experts import ExpertsConformance
from .gradients import GradientConformance
from .helpers import (at_each_step, centres, geometry_beside_grid_thw, image, lit, lit_pixels_land_in_raster_blocks,
                      moved_features, no_patterns, patch_block, sampled_frames_land_in_merge_blocks, taken_sizes)
from .linear import LinearAttentionConformance
from .mamba import MambaConformance
from .modality import ModalityExpertsConformance
from .published import PublishedWidths
from .remote import RemoteConformance
from .text import TextConformance
from .videos import VideoConformance
from .vision import VisionConformance

__all__ = ["TextConformance", "VisionConformance", "ExpertsConformance", "ModalityExpertsConformance", "LinearAttentionConformance", "MambaConformance",
           "CrossAttentionConformance", "AnalysisConformance", "RemoteConformance", "PublishedWidths",
           "GradientConformance", "VideoConformance", "at_each_step", "centres", "geometry_beside_grid_thw", "image", "lit", "lit_pixels_land_in_raster_blocks",
           "moved_features",
           "no_patterns", "patch_block", "sampled_frames_land_in_merge_blocks", "taken_sizes"]
