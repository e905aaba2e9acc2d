"""Perception LM and FastVLM at their published widths and full depth, built on the meta
device (no weights), their geometry at the published processor's resolution, and `vlreg
inspect` of a config alone.

* FastVLM: transformers 5.23's ``FastVlmConfig()`` defaults are FastVLM-7B's (read from the
  class, not recalled): ``fastvit_mci3`` (stages of 2, 12, 24, 4 and 2 blocks, 96 to 1536
  wide, the last two attention stages; a 3072-wide final grid at a stride of 64) on Qwen2
  (28 blocks, 3584 wide, 28 heads over 4). The processor is the published one's shape
  (``LlavaProcessor``, CLIP's 1024-pixel shortest edge and centre crop, ``patch_size`` 64):
  256 tokens an image.
* Perception LM: ``PerceptionLMConfig()`` defaults to no published checkpoint (a ResNet-50
  tower), so the configs are written out below from what transformers' conversion script
  builds for the published ones (``facebook/Perception-LM-1B``: PE-Core-L cut to 23 blocks,
  1024 wide, over 448-pixel tiles of 14-pixel patches, on Llama 3.2 1B; ``-8B``: PE-Core-G,
  47 blocks, 1536 wide, on Llama 3.1 8B), as recalled: there is no hub access here to check
  them, so a test relies only on what follows from them (the blocks the config asks for,
  the tokens the processor's rule gives: 16 x 16 a crop, pooled 2 x 2 from 32 x 32 patches).
"""

import pytest
import transformers

from vlreg import Unavailable
from vlreg.testing import build
from vlreg.testing.conformance import PublishedWidths, image

LLAMA_1B = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}
LLAMA_8B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}


def pe(architecture: str, width: int, depth: int) -> dict:
    return {"architecture": architecture, "do_pooling": False,
            "model_args": {"embed_dim": width, "depth": depth, "img_size": [448, 448], "global_pool": "",
                           "use_post_transformer_norm": False, "init_values": 0.1, "ref_feat_shape": [32, 32]}}


#: PE-Core-L has a class token, which the wrapper drops; PE-Core-G has none.
PLM = {
    "Perception-LM-1B": {"text_config": LLAMA_1B, "vision_config": pe("vit_pe_core_large_patch14_336", 1024, 23),
                         "vision_use_cls_token": True},
    "Perception-LM-8B": {"text_config": LLAMA_8B, "vision_config": pe("vit_pe_core_gigantic_patch14_448", 1536, 47),
                         "vision_use_cls_token": False},
}
#: (width, height) -> the (columns, rows) of 448-pixel tiles the published processor's rule
#: gives, worked out by hand: of the canvases of at most 36 tiles that hold the image, the one
#: where its aspect-kept resize is largest (the aspect is then not kept: it fills the canvas).
TILES = {
    (1024, 768): (7, 5),  # 7 x 5 lets it grow 2.92 times; 6 x 6 only 2.63
    (448, 448): (6, 6),  # a square grows most on the largest square canvas
    (2000, 300): (14, 2),  # 2 rows let it grow most (2.99 times), 14 to 18 columns alike: the rule's order takes 14
}


#: timm's ViT attention runs fused, forming no pattern
FUSED = "forms no pattern"


class TestPerceptionLM1B(PublishedWidths):
    config = transformers.PerceptionLMConfig
    fields = {**PLM["Perception-LM-1B"], "projector_pooling_ratio": 2}
    checkpoint = "perception_lm"
    family = "timm"
    parts = {"vision": ("timm_wrapper", "vlreg-timm")}
    published = {
        "num_layers": 16, "hidden_size": 2048, "num_heads": 32, "num_kv_heads": 8,
        "vision.num_layers": 23, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.intermediate_size": 4096,
        "vision.image_size": 448, "vision.patch_size": 14, "vision.class_tokens": 1,
        "projector.linear_1.weight.shape": (2048, 1024),
        "vision.layers.0.self_attn.qkv.weight.device.type": "meta",
    }
    refused = {"vision.self_attn.attention_scores": FUSED, "vision.self_attn.attention_probabilities": FUSED}
    read_only = ["vision.image_token_mask"]

    def published_config(self, tokenizer=None):
        ids = {"image_token_id": tokenizer.convert_tokens_to_ids("<|image|>"),
               "video_token_id": tokenizer.convert_tokens_to_ids("<|video|>")} if tokenizer is not None else {}
        return self.config(**self.fields, **ids)

    def published_processor(self, tokenizer):
        """448-pixel tiles, up to 36, 14-pixel patches pooled 2 x 2."""
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        return transformers.PerceptionLMProcessor(
            image_processor=transformers.PerceptionLMImageProcessor(tile_size=448, max_num_tiles=36),
            video_processor=tiny.video_processor, tokenizer=tokenizer, patch_size=14, pooling_ratio=2)

    def test_a_thumbnail_then_the_tiles_at_the_published_resolution(self, model):
        for size, (columns, rows) in TILES.items():
            (geometry,) = model.vision.geometry("<|image|>", [image(*size)])  # the host checks the grids against the encoding
            labels = ["thumbnail"] + [f"tile {r},{c}" for r in range(rows) for c in range(columns)]
            assert [grid.label for grid in geometry.grids] == labels, size
            assert all((grid.rows, grid.columns, grid.fold) == (16, 16, 2) for grid in geometry.grids)


class TestPerceptionLM8B(TestPerceptionLM1B):
    fields = {**PLM["Perception-LM-8B"], "projector_pooling_ratio": 2}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8,
        "vision.num_layers": 47, "vision.vision_hidden_size": 1536, "vision.num_heads": 16, "vision.intermediate_size": 8960,
        "vision.image_size": 448, "vision.patch_size": 14, "vision.class_tokens": 0,
        "projector.linear_1.weight.shape": (4096, 1536),
        "vision.layers.0.self_attn.qkv.weight.device.type": "meta",
    }


class TestFastVLM7B(PublishedWidths):
    """``FastVlmConfig()``; the published processor's shape; the image token the tiny tokenizer's."""

    config = transformers.FastVlmConfig
    checkpoint = "fast_vlm"
    family = "timm"
    parts = {"text": ("qwen2", "vlreg-llava")}
    published = {
        "num_layers": 28, "hidden_size": 3584, "num_heads": 28, "num_kv_heads": 4,
        "vision.num_layers": 0, "vision.vision_hidden_size": 3072, "vision.patch_size": 64, "vision.patch_embedding_size": 96,
        "projector.linear_1.weight.shape": (3584, 3072),
    }
    refused = {"vision.layers": "FastViT's stages"}
    aliases = {"model": {"projector": "model.multi_modal_projector"}}

    def published_config(self, tokenizer=None):
        return self.config(**({"image_token_id": tokenizer.convert_tokens_to_ids("<image>")} if tokenizer is not None else {}))

    def published_processor(self, tokenizer):
        images = transformers.CLIPImageProcessor(size={"shortest_edge": 1024}, crop_size={"height": 1024, "width": 1024},
                                                 image_mean=[0.0] * 3, image_std=[1.0] * 3)
        return transformers.LlavaProcessor(image_processor=images, tokenizer=tokenizer, patch_size=64,
                                           vision_feature_select_strategy="full")

    def test_fastvits_stages_and_256_tokens_an_image(self, model):
        assert [len(stage.blocks) for stage in model.vision.timm_model.stages] == [2, 12, 24, 4, 2]
        with pytest.raises(Unavailable, match="no ViT-layout blocks"):
            model.vision.num_heads
        for size in ((1024, 768), (640, 480), (300, 2000)):
            (geometry,) = model.vision.geometry("<image>", [image(*size)])
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns) == (16, 16) and geometry.tokens == 256
