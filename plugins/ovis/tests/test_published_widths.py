"""Ovis 2 at transformers' default widths, built on the meta device (no weights).

``Ovis2Config()`` is the class's defaults, read from it, not a published checkpoint's (none
was at hand): a Qwen2 text model of 32 blocks, 4096 wide, 32 heads; the AIMv2-named tower of
24 blocks, 1024 wide, 8 heads, 14-pixel patches, no fold (``hidden_stride`` 1); 16384 visual
words, 5 of them the structure tokens' rows. Ovis 2.5 (transformers 5.25) at ``Ovis2_5Config()``'s
defaults, likewise: a Qwen3 text model of 32 blocks, 4096 wide, 32 heads of 128; the tower of 27
blocks, 1152 wide, 16 heads, 16-pixel patches merged 2 x 2, 112-pixel windows; 65536 visual
words, the 4 indicator rows among them."""

import pytest
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


PER_CALL = "once per image"


@pytest.mark.skipif(not hasattr(transformers, "Ovis2_5Config"),
                    reason="ovis2_5: not in this transformers release (5.25 adds it)")
class TestOvis2_5(PublishedWidths):
    config = getattr(transformers, "Ovis2_5Config", None)
    checkpoint = "ovis2_5"
    family = "ovis"
    parts = {"text": ("qwen3", "vlreg-text"), "vision": ("ovis2_5_vision", "vlreg-ovis")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 22016,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 16, "vision.spatial_merge_size": 2,
        "vision.window_size": 112, "vision.visual_vocab_size": 65536,
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask"]
