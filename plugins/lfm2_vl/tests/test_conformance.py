"""LFM2-VL and LFM3-VL against the conformance suite the core ships.

LFM2-VL: the text model's blocks are short convolutions (blocks 0 and 1) or attention (block 2),
each block's mixer under its kind's standard name (``short_conv``, ``self_attn``); the
suite checks every block's identity, ``input + attention_output + mlp_output ==
layer_output``, whichever mixer it holds. The 112 x 84 image is 2 x 2 tiles and a
thumbnail (3 x 4 tokens, its crop padded past its patches); the 40 x 40 one a single crop.

LFM3-VL: both its text model and its tower are hybrids: a block's mixer is attention or a short
convolution (1-D over the text, 2-D over each image's grid of patches), held under its
kind's standard name (``self_attn``, ``short_conv``); the suite checks every block's identity,
``input + attention_output + mlp_output == layer_output``, whichever mixer it holds. The
text blocks add each sublayer's normed output (read at ``post_operator_norm`` and
``post_ffn_norm``). The tower attends once per image (`PerImageAttention`), so a tower
block's attention pattern is refused as on the Qwen ViT; `tower_patterns` computes each
call's from the queries and the keys.
"""

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


PER_CALL = "once per image"

LFM3_NATIVE = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.embedding_norm",
    "lm_head": "lm_head",
    "vision": "model.vision_tower",
    "vision.layers": "model.vision_tower.layers",
    "vision.patch_embed": "model.vision_tower.patch_embed",
    "vision.layers.0.short_conv": "model.vision_tower.layers.0.conv",
    "vision.layers.1.self_attn": "model.vision_tower.layers.1.self_attn",
    "vision.layers.0.mlp": "model.vision_tower.layers.0.feed_forward",
    "layers.0.short_conv": "model.language_model.layers.0.conv",
    "layers.1.self_attn": "model.language_model.layers.1.self_attn",
    "layers.0.mlp": "model.language_model.layers.0.feed_forward",
    "layers.0.post_operator_norm": "model.language_model.layers.0.post_operator_norm",
    "projector": "model.multi_modal_projector",
}


class TestLfm3Vl(AnalysisConformance, VisionConformance):
    checkpoint = "lfm3_vl"
    native = LFM3_NATIVE
    o_proj = "o_proj"
    tower_o_proj = "out_proj"
    unavailable = {
        "vision.layers.1.self_attn.attention_scores": PER_CALL,
        "vision.layers.1.self_attn.attention_probabilities": PER_CALL,
    }
    image_sizes = ((112, 84), (84, 140))
