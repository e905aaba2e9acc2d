"""HyperCLOVA X SEED Vision at transformers 5.23's default widths, built on the meta device (no
weights).

``HyperCLOVAXVisionV2Config()`` is the class's defaults, read from it, not a published
checkpoint's (none was at hand): a HyperCLOVA X text model of 32 blocks, 4096 wide, 32 heads,
and Qwen2.5-VL's windowed tower of 32 blocks, 3584 wide, 16 heads, 14-pixel patches, 112-pixel
windows, full attention on blocks 7, 15, 23 and 31, its merger 3584 wide."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per window on a windowed block"


class TestHyperCLOVAXVisionV2(PublishedWidths):
    config = transformers.HyperCLOVAXVisionV2Config
    checkpoint = "hyperclovax_vision_v2"
    family = "hyperclovax"
    parts = {"text": ("hyperclovax", "vlreg-hyperclovax"),
             "vision": ("qwen2_5_vl_vision", "vlreg-qwen2-5-vl")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 11008,
        "vision.num_layers": 32, "vision.vision_hidden_size": 3584, "vision.num_heads": 16, "vision.head_dim": 224,
        "vision.intermediate_size": 3420, "vision.patch_size": 14, "vision.window_size": 112,
        "projector.weight.shape": (4096, 3584),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.vision_model", "projector": "model.projector"}}
