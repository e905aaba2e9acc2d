"""Aya Vision and Command A Vision against the conformance suite the core ships.

Cohere2's blocks are parallel (the attention and the MLP read the same norm), and the
suite's plain sum is their identity: ``input + attention_output + mlp_output ==
layer_output`` (`test_block_identity`)."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP) | {"layers.0.input_layernorm": "model.language_model.layers.0.input_layernorm"}


class TestAyaVision(AnalysisConformance, VisionConformance):
    """SigLIP on Cohere2. The 112 x 84 image is 2 x 2 tiles and a thumbnail, 80 tokens;
    the projector reads the last block's stream before SigLIP's final norm, so
    ``vision.tower_output`` refuses writes."""

    checkpoint = "aya_vision"
    native = NATIVE
    processor_options = {"max_patches": 2}  # 2 x 1 tiles and the thumbnail: 48 tokens, not 80


class TestCohere2Vision(VisionConformance):
    """Command A Vision's shape: SigLIP (its pooling head built and unused) on Cohere2,
    the tower's output projected. The same tiles, each followed by a line break."""

    checkpoint = "cohere2_vision"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = NATIVE
    processor_options = {"max_patches": 2}
