"""Granite-Docling at transformers 5.23's default widths, built on the meta device (no weights).

``GraniteDoclingConfig()`` is the class's defaults, read from it, not a published checkpoint's
(none was at hand): a Granite text model of 28 blocks, 1024 wide, 16 query heads over 4 key
heads; a SigLIP-shaped tower of 12 blocks, 768 wide, 12 heads, 16-pixel patches over 512-pixel
tiles, DeepStack taps at blocks 3, 7 and 10 (added after text blocks 0 to 2)."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestGraniteDocling(PublishedWidths):
    config = transformers.GraniteDoclingConfig
    checkpoint = "granite_docling"
    family = "granite"
    parts = {"text": ("granite_docling_text", "vlreg-granite"), "vision": ("granite_docling_vision", "vlreg-granite")}
    published = {
        "num_layers": 28, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 4, "head_dim": 64,
        "intermediate_size": 2048, "layers.0.residual_multiplier": 0.263,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.patch_size": 16,
        "projector.coarse.projection.weight.shape": (1024, 768 * 16),
    }
    refused = {f"layers.{block}.deepstack_output": "feed layers[0] to layers[2] only" for block in range(3, 28)}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.vision_model", "projector": "model.vision_model.connector"}}
