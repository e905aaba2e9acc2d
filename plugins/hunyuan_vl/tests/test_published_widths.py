"""HunYuan-VL at transformers 5.23's default widths, built on the meta device (no weights).

``HunYuanVLConfig()`` does not build as it is (its text config leaves ``head_dim`` unset, which
the attention needs), so the class's defaults are read with ``head_dim`` 128 (``hidden_size /
num_attention_heads``), not a published checkpoint's (none was at hand): a text model of 32
blocks, 4096 wide, 32 heads, an MLP 11008 wide; the tower of 27 blocks, 1152 wide, 16 heads,
16-pixel patches merged 2 x 2 by a merger whose last map takes 4 x 1152 to 4096."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestHunYuanVL(PublishedWidths):
    config = transformers.HunYuanVLConfig
    fields = {"text_config": {"head_dim": 128}}
    checkpoint = "hunyuan_vl"
    family = "hunyuan_vl"
    parts = {"text": ("hunyuan_vl_text", "vlreg-hunyuan-vl"), "vision": ("hunyuan_vl_vision", "vlreg-hunyuan-vl")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 11008,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 16, "vision.spatial_merge_size": 2,
        "projector.mlp.weight.shape": (4096, 4608),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.vision_tower", "projector": "model.vision_tower.patch_merger"}}
