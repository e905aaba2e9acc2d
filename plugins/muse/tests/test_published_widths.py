"""Muse Glimmer at transformers' default widths, built on the meta device (no weights).

``MuseGlimmerConfig()`` is the class's defaults, read from it (its docstring names
Muse-Glimmer-30B; no published config.json was at hand to check them against): the text
model 52 blocks, 6656 wide, 32 query heads over 2 key heads of 128, every fourth block from
the last NoPE with full attention; the tower 50 blocks, 1536 wide, 16 heads, 14-pixel
patches in windows of 32 a side, every fourth block and the last attending whole images, 2 x 2
patches gathered into a token; the projector 6144 -> 4096 -> 4096 -> 6656.
"""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestMuseGlimmer(PublishedWidths):
    config = transformers.MuseGlimmerConfig
    checkpoint = "muse_glimmer"
    family = "muse"
    parts = {"text": ("muse_glimmer_text", "vlreg-muse"), "vision": ("muse_glimmer_vision", "vlreg-muse")}
    published = {
        "num_layers": 52, "hidden_size": 6656, "num_heads": 32, "num_kv_heads": 2, "head_dim": 128,
        "layers.0.mlp.intermediate_size": 19968,
        "vision.num_layers": 50, "vision.vision_hidden_size": 1536, "vision.num_heads": 16, "vision.head_dim": 96,
        "vision.intermediate_size": 8960, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
        "vision.window_size": 448, "projector.fc1.weight.shape": (4096, 6144),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask"]


class TestMuseSpark(PublishedWidths):
    """``MuseSparkConfig()``'s defaults (its docstring names Muse-Spark-Open-816B-A42B): the text
    model 62 blocks, 8192 wide, 128 query heads over 16 key heads of 64, every block routed to
    8 of 256 experts that run 4096 wide (``moe_hidden_size``); Glimmer's tower."""

    config = transformers.MuseSparkConfig
    checkpoint = "muse_spark"
    family = "muse"
    parts = {"text": ("muse_spark_text", "vlreg-muse"), "vision": ("muse_spark_vision", "vlreg-muse")}
    published = {
        "num_layers": 62, "hidden_size": 8192, "num_heads": 128, "num_kv_heads": 16, "head_dim": 64,
        "layers.0.mlp.num_experts": 256, "layers.0.mlp.top_k": 8, "layers.0.mlp.intermediate_size": 4096,
        "layers.0.mlp.expert_hidden_size": 4096, "layers.0.mlp.routed_scaling_factor": 1.0,
        "vision.num_layers": 50, "vision.vision_hidden_size": 1536, "vision.num_heads": 16,
        "vision.spatial_merge_size": 2, "vision.window_size": 448, "projector.fc1.weight.shape": (4096, 6144),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL,
               "audio": "audio tower",
               "mlp.shared_expert_output": "no shared expert"}
    read_only = ["vision.image_token_mask"]
