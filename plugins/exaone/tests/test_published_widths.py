"""EXAONE 4.5 at transformers 5.23's default widths, built on the meta device (no weights).

``Exaone4_5_Config()`` is the class's defaults, read from it, not a published checkpoint's
(none was at hand): an EXAONE 4 text model of 32 blocks, 4096 wide, 32 heads (every fourth
block global), and the windowed Qwen ViT of 32 blocks, 3584 wide, 16 query heads over 8 key
heads, 14-pixel patches, 112-pixel windows, full attention on blocks 7, 15, 23 and 31."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per window on a windowed block"


class TestExaone4_5(PublishedWidths):
    config = transformers.Exaone4_5_Config
    checkpoint = "exaone4_5"
    family = "exaone"
    parts = {"text": ("exaone4", "vlreg-exaone"), "vision": ("exaone4_5_vision", "vlreg-exaone")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 16384,
        "vision.num_layers": 32, "vision.vision_hidden_size": 3584, "vision.num_heads": 16, "vision.head_dim": 224,
        "vision.intermediate_size": 3420, "vision.patch_size": 14, "vision.window_size": 112,
        "vision.spatial_merge_size": 2, "vision.fullatt_block_indexes": (7, 15, 23, 31),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.visual", "projector": "model.visual.merger"}}
