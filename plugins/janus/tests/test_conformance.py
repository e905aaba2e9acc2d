"""Janus against the conformance suite the core ships: its understanding path (the tower,
the aligner, the scatter into Llama's embeddings). ``vision.image_codes`` is refused on
every load: the VQ model encodes images only to generate them."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP, vision="model.vision_model", projector="model.aligner")


class TestJanus(AnalysisConformance, VisionConformance):
    """A square image (8 x 8 tokens, every one over the image), then a 112 x 84 one padded
    to a square (its top and bottom rows of tokens over padding alone): the analysis runs
    on the first, the two-invoke tests take both. `vlreg.analysis.tower_patterns` refuses
    an image whose only grid holds padding (`test_janus.py`)."""

    checkpoint = "janus"
    native = NATIVE
    unavailable = {"vision.image_codes": "only to generate images"}
    image_sizes = ((84, 84), (112, 84))


class TestDeepseekVL(AnalysisConformance, VisionConformance):
    """DeepSeek-VL: the same layout over transformers' SigLIP (its pooling head on, reaching
    nothing) and a Llama text model, both served by vlreg-llava; nothing refused."""

    checkpoint = "deepseek_vl"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = NATIVE
    image_sizes = ((84, 84), (112, 84))
