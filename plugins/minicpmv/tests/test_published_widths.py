"""MiniCPM-V 4.6, 4.7 and MiniCPM-OCR at their configs' widths, built on the meta device (no
weights).

``MiniCPMV4_6Config()``, ``MiniCPMV4_7Config()`` and ``MiniCPMOcrConfig()`` are transformers
5.23's defaults (read from the classes, not recalled): a 12-block tower 768 wide (12 heads,
3072 intermediate, 16-pixel patches), its ``vit_merger`` after block 6 (``insert_layer_id``),
on Qwen3.5's default text model (32 blocks 4096 wide, three linear-attention blocks to each
full one; 16 query heads over 4 key/value heads of 256). MiniCPM-OCR's ``"4x"`` mode skips
the merger. The processor is the tiny checkpoint's (nothing is processed on meta).
"""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "the attention runs once per slice"
PUBLISHED = {
    "num_layers": 32, "hidden_size": 4096, "num_heads": 16, "num_kv_heads": 4, "head_dim": 256,
    "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.head_dim": 64,
    "vision.intermediate_size": 3072, "vision.patch_size": 16,
}


class TestMiniCPMV4_6(PublishedWidths):
    config = transformers.MiniCPMV4_6Config
    checkpoint = "minicpmv4_6"
    family = "minicpmv"
    parts = {"text": ("qwen3_5_text", "vlreg-qwen3-vl"), "vision": ("minicpmv4_6_vision", "vlreg-minicpmv")}
    published = PUBLISHED
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    folds = [1] * 7 + [2] * 5  # blocks 0-6 on the patches, 7-11 on the grid the vit_merger halved

    def test_each_blocks_rows_at_the_published_depth(self, model):
        assert [model.vision.layer_fold(block) for block in range(12)] == self.folds


class TestMiniCPMV4_7(TestMiniCPMV4_6):
    config = transformers.MiniCPMV4_7Config
    checkpoint = "minicpmv4_7"
    parts = {"text": ("qwen3_5_text", "vlreg-qwen3-vl"), "vision": ("minicpmv4_7_vision", "vlreg-minicpmv")}


class TestMiniCPMOcr(TestMiniCPMV4_6):
    config = transformers.MiniCPMOcrConfig
    checkpoint = "minicpm_ocr"
    parts = {"text": ("qwen3_5_text", "vlreg-qwen3-vl"), "vision": ("minicpm_ocr_vision", "vlreg-minicpmv")}
    folds = [1] * 12  # "4x": no merge mid-tower
