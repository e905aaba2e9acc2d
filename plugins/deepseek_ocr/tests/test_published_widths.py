"""DeepSeek-OCR 2 at the published widths, built on the meta device (no weights).

``DeepseekOcr2Config()`` does not build (its text config has no ``mlp_layer_types``), and its
sub-configs' defaults are their base classes' (DeepSeek-V2's and Qwen2's full widths), so the
fields are given: SAM's ViT-B (the class's defaults: 12 blocks, 768 wide, 16-pixel patches,
downsampled to 896 channels), a Qwen2-0.5B query encoder (24 blocks, 896 wide, 14 heads over
2 key-value heads; its width is the one SAM's 896 channels feed), and DeepSeek-OCR's
DeepSeek-3B-MoE text model (12 blocks, 1280 wide, 10 heads; the first block dense, then 6 of
64 experts beside 2 shared ones) as the DeepSeek-OCR report states them; no published
config file was at hand to check them against.
"""

import transformers

from vlreg.testing.conformance import PublishedWidths

from vlreg_deepseek_ocr.text import GreedyRoutedMoe

TEXT = {"vocab_size": 129280, "hidden_size": 1280, "intermediate_size": 6848, "num_hidden_layers": 12,
        "num_attention_heads": 10, "num_key_value_heads": 10, "n_routed_experts": 64, "num_experts_per_tok": 6,
        "n_shared_experts": 2, "moe_intermediate_size": 896, "topk_method": "greedy",
        "mlp_layer_types": ["dense"] + ["sparse"] * 11}
ENCODER = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
           "num_key_value_heads": 2}


class TestDeepseekOcr2(PublishedWidths):
    config = transformers.DeepseekOcr2Config
    fields = {"text_config": TEXT, "vision_config": {"sam_config": {}, "encoder_config": ENCODER}}
    checkpoint = "deepseek_ocr2"
    family = "deepseek_ocr"
    parts = {"text": ("deepseek_ocr2_text", "vlreg-deepseek-ocr"),
             "vision": ("deepseek_ocr2_vision", "vlreg-deepseek-ocr")}
    published = {
        "num_layers": 12, "hidden_size": 1280, "num_heads": 10, "num_kv_heads": 10, "head_dim": 128,
        "layers.0.mlp.intermediate_size": 6848, "layers.1.mlp.num_experts": 64, "layers.1.mlp.top_k": 6,
        "layers.1.mlp.intermediate_size": 896,
        "vision.num_layers": 24, "vision.vision_hidden_size": 896, "vision.num_heads": 14, "vision.head_dim": 64,
        "vision.intermediate_size": 4864, "vision.patch_size": 16, "vision.image_size": 1024,
        "vision.trailing_tokens": 256, "projector.weight.shape": (1280, 896),
    }
    refused = {}

    def test_the_dense_block_then_the_routed_ones(self, model):
        assert not isinstance(model.layers[0].mlp, GreedyRoutedMoe)
        assert all(isinstance(block.mlp, GreedyRoutedMoe) for block in model.layers[1:])


class TestUnlimitedOcr(PublishedWidths):
    """``UnlimitedOcrConfig()``: transformers 5.23's defaults (read from the classes): SAM's ViT-B
    (its convolutions to 1024 channels), a CLIP-L encoder (24 blocks, 1024 wide, 16 heads), the
    DeepSeek-3B-MoE text model (12 blocks, 1280 wide; the first dense, then 6 of 64 experts),
    the projector over CLIP's and SAM's channels side by side."""

    config = transformers.UnlimitedOcrConfig
    checkpoint = "unlimited_ocr"
    family = "deepseek_ocr"
    parts = {"text": ("unlimited_ocr_text", "vlreg-deepseek-ocr"),
             "vision": ("unlimited_ocr_vision", "vlreg-deepseek-ocr")}
    published = {
        "num_layers": 12, "hidden_size": 1280, "num_heads": 10, "num_kv_heads": 10, "head_dim": 128,
        "layers.0.mlp.intermediate_size": 6848, "layers.1.mlp.num_experts": 64, "layers.1.mlp.top_k": 6,
        "layers.1.mlp.intermediate_size": 896,
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 4096, "vision.patch_size": 16, "vision.image_size": 1024,
        "projector.weight.shape": (1280, 2048),
    }
    refused = {}

    def test_the_dense_block_then_the_routed_ones(self, model):
        assert not isinstance(model.layers[0].mlp, GreedyRoutedMoe)
        assert all(isinstance(block.mlp, GreedyRoutedMoe) for block in model.layers[1:])
