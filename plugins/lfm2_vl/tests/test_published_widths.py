"""LFM2-VL-1.6B and LFM2-VL-450M at their published widths and full depth, built on the
meta device (no weights), their geometry at the published processor's resolution, and
`vlreg inspect` of a config alone.

The configs are written out below from the published ``config.json`` files (LiquidAI/
LFM2-VL-1.6B: LFM2-1.2B's text model and SigLIP 2 NaFlex shape-optimized 400M; LiquidAI/
LFM2-VL-450M: LFM2-350M's and SigLIP 2 NaFlex base), as recalled: there is no hub access
here to check them, so a test relies only on what follows from them (the blocks' kinds
from ``full_attn_idxs``, the MLP widths ``block_auto_adjust_ff_dim`` makes, the tokens the
processor's rule gives), not on their being exact.

LFM3-VL at transformers 5.23's default widths, also on meta: ``Lfm3VlConfig()`` is the class's defaults, read from it, not a published checkpoint's (none
was at hand; the classes cite LiquidAI/LFM3-VL-2B): an LFM3 text model of 24 blocks, 2048
wide, 16 query heads over 4 key heads of 128, a sliding-window block every fourth from block
4, full attention on blocks 2, 6, 10, ..., short convolutions on the rest; a tower of 14
blocks, 1024 wide, 16 query heads over 8 key heads, 16-pixel patches, 2 x 2 merge blocks,
attention on its even blocks from block 2, 2-D convolutions on the rest.
"""

import transformers

from vlreg.testing.conformance import PublishedWidths, image

ATTENTION = [2, 5, 8, 10, 12, 14]
LFM2 = {"model_type": "lfm2", "num_hidden_layers": 16, "full_attn_idxs": ATTENTION, "num_key_value_heads": 8,
        "vocab_size": 65536, "conv_L_cache": 3, "block_auto_adjust_ff_dim": True, "block_multiple_of": 256,
        "block_ffn_dim_multiplier": 1.0}
PUBLISHED = {
    "LFM2-VL-1.6B": {
        "text_config": {**LFM2, "hidden_size": 2048, "num_attention_heads": 32, "block_ff_dim": 12288},
        "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                          "num_hidden_layers": 27, "num_attention_heads": 16, "patch_size": 16, "num_patches": 256,
                          "vision_use_head": False},
        "projector_hidden_size": 2560, "downsample_factor": 2,
    },
    "LFM2-VL-450M": {
        "text_config": {**LFM2, "hidden_size": 1024, "num_attention_heads": 16, "block_ff_dim": 6656},
        "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 768, "intermediate_size": 3072,
                          "num_hidden_layers": 12, "num_attention_heads": 12, "patch_size": 16, "num_patches": 256,
                          "vision_use_head": False},
        "projector_hidden_size": 2560, "downsample_factor": 2,
    },
}
#: (width, height) -> (tiles' columns x rows, the last crop's tokens rows x columns), by hand from the
#: published processor's rule: 512-pixel tiles of 16 x 16 tokens (32 pixels each), one crop of 64 to
#: 256 tokens, 2 to 10 tiles where the image rounded to whole tokens passes 512 tokens.
GEOMETRY = {
    (1024, 768): ((3, 2), (13, 18)),  # aspect 1.33: 3 x 2 is the closest within 10 tiles; thumbnail 936 patches
    (256, 256): ((1, 1), (8, 8)),  # 64 tokens: min_image_tokens exactly
    (300, 2000): ((1, 7), (41, 6)),  # aspect 0.15: 1 x 7 (0.143)
}


class TestLfm2Vl16B(PublishedWidths):
    config = transformers.Lfm2VlConfig
    fields = PUBLISHED["LFM2-VL-1.6B"]
    checkpoint = "lfm2_vl"
    family = "lfm2_vl"
    parts = {"text": ("lfm2", "vlreg-lfm2-vl"), "vision": ("siglip2_vision_model", "vlreg-lfm2-vl")}
    published = {
        "num_layers": 16, "hidden_size": 2048, "num_heads": 32, "num_kv_heads": 8, "head_dim": 64,
        "intermediate_size": 8192,  # two thirds of block_ff_dim, up to 256s
        "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.num_layers": 27, "vision.patch_size": 16,
        "projector.linear_1.weight.shape": (2560, 1152 * 2**2),  # 2 x 2 patches a token
    }
    read_only = ["vision.image_token_mask"]
    aliases = {"model": {"projector": "model.multi_modal_projector"}}

    def published_config(self, tokenizer=None):
        token = {"image_token_id": tokenizer.convert_tokens_to_ids("<image>")} if tokenizer is not None else {}
        return self.config(**self.fields, **token)

    def published_processor(self, tokenizer):
        """The published processor settings: the image processor's defaults."""
        return transformers.Lfm2VlProcessor(image_processor=transformers.Lfm2VlImageProcessor(), tokenizer=tokenizer)

    def test_the_blocks_kinds_and_widths(self, model):
        assert [block.block_index for block in model.layers if "self_attn" in block.__dict__] == ATTENTION
        assert all("short_conv" in block.__dict__ for block in model.layers if block.block_index not in ATTENTION)
        assert model.intermediate_size != model._module.config.text_config.intermediate_size
        assert "layers.0-1,3-4,6-7,9,11,13,15.short_conv.conv_output" in model.support()

    def test_tiles_then_a_thumbnail_at_the_published_resolution(self, model):
        for size, ((columns, rows_), (last_rows, last_columns)) in GEOMETRY.items():
            (geometry,) = model.vision.geometry("<image>", [image(*size)])  # the host checks the grids against the encoding
            tiles = columns * rows_
            assert [g.label for g in geometry.grids][:-1] == [f"tile {r},{c}" for r in range(rows_) for c in range(columns)][
                : tiles if tiles > 1 else 0], size
            assert all((g.rows, g.columns, g.fold) == (16, 16, 2) for g in geometry.grids[:-1])
            last = geometry.grids[-1]
            assert (last.rows, last.columns, last.label) == (last_rows, last_columns, "thumbnail" if tiles > 1 else "image")
            assert geometry.tokens == (tiles * 256 if tiles > 1 else 0) + last_rows * last_columns
            encoded = model.processor(text="<image>", images=[image(*size)], return_tensors="pt")
            assert encoded["pixel_values"].shape[1] == 1024 > last.tokens * 4  # the last crop is padded past its patches
            assert int(encoded["pixel_attention_mask"][-1].sum()) == last.tokens * 4


class TestLfm2Vl450M(TestLfm2Vl16B):
    fields = PUBLISHED["LFM2-VL-450M"]
    published = {
        "num_layers": 16, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 8, "head_dim": 64, "intermediate_size": 4608,
        "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.num_layers": 12, "vision.patch_size": 16,
        "projector.linear_1.weight.shape": (2560, 768 * 2**2),
    }


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
