"""LLaVA-OneVision-1.5 (transformers 5.25) at its config class's default widths, built on the
meta device (no weights).

``LlavaOnevision15Config()`` is the class's defaults, read from it, not a published checkpoint's
(none was at hand): a Qwen3 text model of 32 blocks, 4096 wide, 32 heads of 128; RICE-ViT of 24
blocks, 1024 wide, 16 heads, 14-pixel patches merged 2 x 2, no windows."""

import pytest

transformers = pytest.importorskip("transformers.models.llava_onevision1_5",
                                   reason="llava_onevision1_5 is transformers 5.25's: this release has no such model type")

from vlreg.testing.conformance import PublishedWidths  # noqa: E402

PER_CALL = "once per image"


class TestLlavaOnevision15(PublishedWidths):
    config = transformers.LlavaOnevision15Config
    checkpoint = "llava_onevision1_5"
    family = "qwen2_5_vl"
    parts = {"text": ("qwen3", "vlreg-text"), "vision": ("llava_onevision1_5_vision", "vlreg-qwen2-5-vl")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 22016,
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 4096, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
        "vision.window_size": None, "vision.class_tokens": 1,
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.visual", "projector": "model.visual.merger"}}
