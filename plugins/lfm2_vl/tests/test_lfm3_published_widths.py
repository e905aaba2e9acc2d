"""LFM3-VL at transformers 5.23's default widths, built on the meta device (no weights).

``Lfm3VlConfig()`` is the class's defaults, read from it, not a published checkpoint's (none
was at hand; the classes cite LiquidAI/LFM3-VL-2B): an LFM3 text model of 24 blocks, 2048
wide, 16 query heads over 4 key heads of 128, a sliding-window block every fourth from block
4, full attention on blocks 2, 6, 10, ..., short convolutions on the rest; a tower of 14
blocks, 1024 wide, 16 query heads over 8 key heads, 16-pixel patches, 2 x 2 merge blocks,
attention on its even blocks from block 2, 2-D convolutions on the rest."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"
TEXT_ATTENTION = [i for i in range(24) if i % 4 == 2 or (i % 4 == 0 and i > 0)]
TOWER_ATTENTION = [i for i in range(14) if i >= 2 and i % 2 == 0]


class TestLfm3Vl(PublishedWidths):
    config = transformers.Lfm3VlConfig
    checkpoint = "lfm3_vl"
    family = "lfm2_vl"
    parts = {"text": ("lfm3", "vlreg-lfm2-vl"), "vision": ("lfm3_vl_vision", "vlreg-lfm2-vl")}
    published = {
        "num_layers": 24, "hidden_size": 2048, "num_heads": 16, "num_kv_heads": 4, "head_dim": 128,
        "intermediate_size": 7680,
        "vision.num_layers": 14, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 2560, "vision.patch_size": 16, "vision.spatial_merge_size": 2,
        "projector.linear_1.weight.shape": (4096, 1024 * 2**2),
    }
    refused = {f"vision.layers.{','.join(map(str, TOWER_ATTENTION))}.self_attn.attention_{name}": PER_CALL
               for name in ("scores", "probabilities")}
    read_only = ["vision.image_token_mask"]
    aliases = {"model": {"vision": "model.vision_tower", "projector": "model.multi_modal_projector"}}

    def test_the_blocks_kinds(self, model):
        for blocks, attention in ((model.layers, TEXT_ATTENTION), (model.vision.layers, TOWER_ATTENTION)):
            assert [block.block_index for block in blocks if "self_attn" in block.__dict__] == attention
            assert all("short_conv" in block.__dict__ for block in blocks if block.block_index not in attention)
