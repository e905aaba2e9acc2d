"""MiniMax-M3-VL against the conformance suite the core ships: a packed SigLIP-named tower
attending once per image (its pattern refused, as the Qwen ViT's), the projector outside the
tower, a text model whose second block reads only the key blocks its indexer selects and routes
each token to sigmoid-chosen experts after shared experts (`SigmoidRoutedMoe.route`)."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import composite

#: The tower's names, from the tower: SigLIP's blocks straight under it, the embeddings the patch embedding.
TOWER = {
    "layers": "layers",
    "patch_embed": "embeddings",
    "layers.0.self_attn": "layers.0.self_attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layer_norm1",
    "layers.0.post_attention_layernorm": "layers.0.layer_norm2",
}


class TestMiniMaxM3VL(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "minimax_m3_vl"
    native = composite(TOWER) | {"layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
                                 "layers.1.self_attn.indexer": "model.language_model.layers.1.self_attn.indexer"}
    unavailable = no_patterns("once per image")
    renormalized = False  # sigmoid scores plus a correction bias, renormalized (SigmoidRoutedMoe.route)
    image_sizes = ((112, 84), (56, 112))
