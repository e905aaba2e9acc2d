"""Cosmos3 Edge at transformers 5.23's default widths, built on the meta device (no weights).

``Cosmos3EdgeConfig()`` is the class's defaults, read from it, not a published checkpoint's
(none was at hand): a text model of 28 blocks, 2048 wide, 16 query heads over 8 key heads of
128, a two-projection MLP 9216 wide; the packed SigLIP 2 tower of 27 blocks, 1152 wide, 16
heads, 16-pixel patches merged 2 x 2, a learned 16 x 16 grid of positions; a projector from
4 patches' 4608 to 11520 to the text width."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestCosmos3Edge(PublishedWidths):
    config = transformers.Cosmos3EdgeConfig
    checkpoint = "cosmos3_edge"
    family = "cosmos3_edge"
    parts = {"text": ("cosmos3_edge_text", "vlreg-cosmos3-edge"), "vision": ("cosmos3_edge_vision", "vlreg-cosmos3-edge")}
    published = {
        "num_layers": 28, "hidden_size": 2048, "num_heads": 16, "num_kv_heads": 8, "head_dim": 128,
        "intermediate_size": 9216,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 16, "vision.spatial_merge_size": 2,
        "projector.linear_fc1.weight.shape": (11520, 4608), "projector.linear_fc2.weight.shape": (2048, 11520),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    aliases = {"model": {"vision": "model.visual", "projector": "model.projector"}}
