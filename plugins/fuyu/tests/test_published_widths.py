"""Fuyu at transformers 5.23's default widths (``FuyuConfig()``: Fuyu-8B's), built on the meta
device (no weights): a Persimmon text model of 36 blocks, 4096 wide, 64 heads of 64 with
half of each head rotated, and 30-pixel patches embedded by one linear map."""

import transformers

from vlreg.testing.conformance import PublishedWidths

NO_TOWER = "Fuyu has no vision tower"


class TestFuyu8B(PublishedWidths):
    config = transformers.FuyuConfig
    checkpoint = "fuyu"
    family = "fuyu"
    parts = {"text": ("persimmon", "vlreg-fuyu"), "vision": ("fuyu", "vlreg-fuyu")}
    published = {
        "num_layers": 36, "hidden_size": 4096, "num_heads": 64, "num_kv_heads": 64, "head_dim": 64,
        "intermediate_size": 16384, "vision.num_layers": 0, "vision.vision_hidden_size": 4096,
        "vision.patch_size": 30, "vision.weight.shape": (4096, 2700),
    }
    refused = {"vision.patch_embeddings": NO_TOWER}
    aliases = {"model": {"vision": "model.vision_embed_tokens", "norm": "model.language_model.final_layernorm"}}
