"""MiniMax-M3-VL at transformers 5.23's default widths, built on the meta device (no weights).

``MiniMaxM3VLConfig()`` is the class's defaults, read from it (MiniMax-M3's shape, as the class
documents it): a text model of 60 blocks, 6144 wide, 64 query heads over 4 key heads of 128, every
block full attention (the default builds no indexer) and every MLP 4 of 128 experts 3072 wide
beside shared experts 3072 wide, scaled by 2.0; the packed tower of 32 blocks, 1280 wide, 16 heads,
14-pixel patches merged 2 x 2; a projector 6144 wide."""

import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestMiniMaxM3VL(PublishedWidths):
    config = transformers.MiniMaxM3VLConfig
    checkpoint = "minimax_m3_vl"
    family = "minimax_m3_vl"
    parts = {"text": ("minimax_m3_vl_text", "vlreg-minimax-m3-vl"),
             "vision": ("minimax_m3_vl_vision", "vlreg-minimax-m3-vl")}
    published = {
        "num_layers": 60, "hidden_size": 6144, "num_heads": 64, "num_kv_heads": 4, "head_dim": 128,
        "layers.0.mlp.num_experts": 128, "layers.0.mlp.top_k": 4, "layers.0.mlp.intermediate_size": 3072,
        "layers.0.mlp.routed_scaling_factor": 2.0,
        "layers.0.mlp.shared_experts.down_proj.weight.shape": (6144, 3072),
        "vision.num_layers": 32, "vision.vision_hidden_size": 1280, "vision.num_heads": 16, "vision.head_dim": 80,
        "vision.intermediate_size": 5120, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
        "projector.linear_1.weight.shape": (6144, 1280), "projector.merge_linear_1.weight.shape": (6144, 24576),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL,
               **{f"self_attn.{name}": "no standard names for a sparse-attention indexer"
                  for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}}
