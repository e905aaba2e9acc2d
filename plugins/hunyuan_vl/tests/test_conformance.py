"""HunYuan-VL against the conformance suite the core ships: a packed SigLIP-named tower attending
once per image (its pattern refused, as the Qwen ViT's), its learned positions resampled per
image, its merger (the projector) run once per image inside the tower, begin, newline and end
tokens among an image's (so the tower's pattern, over patches, does not fold onto the image's
tokens: `tower_patterns` refuses, naming `self_attn.patterns`)."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import composite

PER_CALL = "once per image"
TOWER = {
    "layers": "layers",
    "patch_embed": "embeddings.patch_embedding",
    "layers.0.self_attn": "layers.0.self_attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layer_norm1",
    "layers.0.post_attention_layernorm": "layers.0.layer_norm2",
}


class TestHunYuanVL(AnalysisConformance, VisionConformance):
    checkpoint = "hunyuan_vl"
    native = composite(TOWER, projector="model.vision_tower.patch_merger")
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (64, 96))
    # the embeddings read their position table's weight directly (no module call), which
    # accelerate leaves on the meta device when the tower is offloaded: the blocks go to disk
    on_disk = "vision.layers"
    analysis_refuses = {"tower_patterns": "tokens over no patches"}
