"""Ovis 2 at transformers' default widths, built on the meta device (no weights).

``Ovis2Config()`` is the class's defaults, read from it, not a published checkpoint's (none
was at hand): a Qwen2 text model of 32 blocks, 4096 wide, 32 heads; the AIMv2-named tower of
24 blocks, 1024 wide, 8 heads, 14-pixel patches, no fold (``hidden_stride`` 1); 16384 visual
words, 5 of them the structure tokens' rows."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestOvis2(PublishedWidths):
    config = transformers.Ovis2Config
    checkpoint = "ovis2"
    family = "ovis"
    parts = {"text": ("qwen2", "vlreg-llava"), "vision": ("ovis2_vision", "vlreg-ovis")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 22016,
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 8, "vision.head_dim": 128,
        "vision.intermediate_size": 2816, "vision.patch_size": 14, "vision.hidden_stride": 1,
        "vision.visual_vocab_size": 16384,
    }
    refused = {}
    read_only = ["vision.image_token_mask"]
