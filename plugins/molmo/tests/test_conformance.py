"""Molmo 2 against the conformance suite the core ships: a batch-first crop tower read at two
blocks' streams, a pooling adapter, and an additive entry (block 0 receives the placeholders'
embeddings plus the features)."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import composite

TOWER = {
    "layers": "layers",
    "patch_embed": "patch_embedding",
    "layers.0.self_attn": "layers.0.self_attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layer_norm1",
    "layers.0.post_attention_layernorm": "layers.0.layer_norm2",
}


class TestMolmo2(AnalysisConformance, VisionConformance):
    checkpoint = "molmo2"
    native = composite(TOWER)
    image_sizes = ((112, 84), (84, 112))
    processor_prefix = "<|endoftext|>"  # the processor writes the BOS token before a prompt without it
    image_block = "mm_token_type_ids"  # an image's start token attends to its patches' tokens
    analysis_refuses = {"tower_patterns": "no token owns patches"}  # tokens pool windows of overlapping crops
