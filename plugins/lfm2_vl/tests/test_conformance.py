"""LFM2-VL against the conformance suite the core ships.

The text model's blocks are short convolutions (blocks 0 and 1) or attention (block 2),
each block's mixer under its kind's standard name (``short_conv``, ``self_attn``); the
suite checks every block's identity, ``input + attention_output + mlp_output ==
layer_output``, whichever mixer it holds. The 112 x 84 image is 2 x 2 tiles and a
thumbnail (3 x 4 tokens, its crop padded past its patches); the 40 x 40 one a single crop."""

from vlreg_lfm2_vl.vision import PER_CROP

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import SIGLIP, composite

NATIVE = composite(SIGLIP) | {
    "norm": "model.language_model.embedding_norm",
    "layers.0.short_conv": "model.language_model.layers.0.conv",
    "layers.0.short_conv.conv": "model.language_model.layers.0.conv.conv",
    "layers.2.self_attn": "model.language_model.layers.2.self_attn",
    "layers.0.mlp": "model.language_model.layers.0.feed_forward",
    "layers.0.operator_norm": "model.language_model.layers.0.operator_norm",
}


class TestLfm2Vl(AnalysisConformance, VisionConformance):
    """SigLIP 2 (NaFlex) on LFM2, the projector called once per crop (before transformers
    5.24), or once on every crop's slots, the padding's among them (from 5.24)."""

    checkpoint = "lfm2_vl"
    projector_output_is_features = PER_CROP
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = NATIVE
    o_proj = "out_proj"
    image_sizes = ((112, 84), (40, 40))
