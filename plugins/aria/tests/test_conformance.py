"""Aria against the conformance suite the core ships.

The default image (112 x 84) is one 980-pixel frame of 14 x 14 patches, read by 8 learned
queries: 8 image tokens. The text model's MLPs are experts beside shared experts.
"""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP)


class TestAria(ExpertsConformance, AnalysisConformance, VisionConformance):
    """The queries' features reach the embeddings through ``inputs_embeds.masked_scatter``."""

    checkpoint = "aria"
    native = NATIVE
    down_proj_transposed = True  # each expert's down projection is [intermediate, hidden]
    processor_options = {"max_image_size": 490}  # a 490-pixel frame: 4 queries, not 8
    analysis_refuses = {"tower_patterns": "resampler"}
