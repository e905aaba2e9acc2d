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


class TestGranite4Vision(PublishedWidths):
    """Granite 4 Vision at ``Granite4VisionConfig``'s defaults (a Granite text model of 32 blocks,
    4096 wide, 32 heads; a CLIP tower of 12 blocks, 768 wide, 12 heads; a one-layer Q-Former in
    each projector), with the fields the class leaves unset (it does not build without them)
    given values of ours, not a published checkpoint's (none was at hand): 336-pixel crops of
    14-pixel patches (the default crop grid is in 336s), ``downsample_rate`` "1/4", the last
    block's stream into text block 0, the spatial projectors at the default blocks 12 to 21."""

    config = transformers.Granite4VisionConfig
    fields = {"vision_config": {"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14},
              "downsample_rate": "1/4", "deepstack_layer_map": [[-1, 0]]}
    checkpoint = "granite4_vision"
    family = "granite"
    parts = {"text": ("granite4_vision_text", "vlreg-granite"), "vision": ("clip_vision_model", "vlreg-llava")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 11008, "layers.0.residual_multiplier": 1.0,
        "vision.num_layers": 12, "vision.vision_hidden_size": 768, "vision.num_heads": 12, "vision.patch_size": 14,
        "projector.out_linear.weight.shape": (4096, 768), "projector.query.shape": (1, 1, 768),
    }
    refused = {f"layers.{block}.deepstack_input": "before text blocks [0, 12, 15, 18, 21] only"
               for block in range(32) if block not in (0, 12, 15, 18, 21)}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.vision_tower", "projector": "model.layerwise_projectors.0"}}
