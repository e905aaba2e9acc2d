"""Perception LM and FastVLM against the conformance suite the core ships.

* Perception LM: the Perception Encoder is timm's, its blocks served (`vlreg_timm.vision`):
  their sublayers are read where the stream adds them (after the layer scale), so the plain
  block identity holds; timm's fused attention is handed queries, keys and values and forms
  no pattern, which is refused by name. The 112 x 84 image is its thumbnail and 2 x 2 tiles,
  16 tokens each.
* FastVLM: FastViT's stages are no standard blocks, so ``vision.layers`` is refused by name
  (the wrapper's claim) and the tower is served at its edges; the 112 x 84 image is its
  32-pixel centre crop, 4 x 4 tokens.
"""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import composite

COMPOSITE = composite() | {"layers.0.input_layernorm": "model.language_model.layers.0.input_layernorm"}
#: timm's fused path (its default) forms no pattern; its queries, keys and values are served.
NO_PATTERN = "runs the fused F.scaled_dot_product_attention, which forms no pattern"


class TestPerceptionLM(AnalysisConformance, VisionConformance):
    """The Perception Encoder (timm) on Llama; a thumbnail and tiles, pooled 2 x 2."""

    checkpoint = "perception_lm"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = COMPOSITE | composite({  # the Perception Encoder's names, from the tower
        "layers": "timm_model.blocks",
        "patch_embed": "timm_model.patch_embed.proj",
        "norm": "timm_model.norm",
        "layers.0.self_attn": "timm_model.blocks.0.attn",
        "layers.0.mlp": "timm_model.blocks.0.mlp",
        "layers.0.input_layernorm": "timm_model.blocks.0.norm1",
        "layers.0.post_attention_layernorm": "timm_model.blocks.0.norm2",
    })
    tower_o_proj = "proj"
    unavailable = no_patterns(NO_PATTERN)
    analysis_refuses = {"tower_patterns": NO_PATTERN}


class TestFastVlm(AnalysisConformance, VisionConformance):
    """FastViT (timm) on Qwen2; a centre crop, a token per cell of the last grid."""

    checkpoint = "fast_vlm"
    #: transformers' own forward fails with the tower on disk (it moves the pixels to a tower
    #: weight's device, the meta device when offloaded), and the tower has no standard blocks:
    #: the text blocks go there.
    on_disk = "layers"
    native = {**COMPOSITE, "vision.patch_embed": "model.vision_tower.timm_model.stem"}
    tower_blocks = False
    analysis_refuses = {"tower_patterns": "FastViT's stages"}
