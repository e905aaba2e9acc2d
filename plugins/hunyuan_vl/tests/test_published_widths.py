"""HunYuan-VL at transformers 5.23's default widths, built on the meta device (no weights).

``HunYuanVLConfig()`` does not build as it is (its text config leaves ``head_dim`` unset, which
the attention needs), so the class's defaults are read with ``head_dim`` 128 (``hidden_size /
num_attention_heads``), not a published checkpoint's (none was at hand): a text model of 32
blocks, 4096 wide, 32 heads, an MLP 11008 wide; the tower of 27 blocks, 1152 wide, 16 heads,
16-pixel patches merged 2 x 2 by a merger whose last map takes 4 x 1152 to 4096."""

import pytest
import transformers

from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"


class TestHunYuanVL(PublishedWidths):
    config = transformers.HunYuanVLConfig
    fields = {"text_config": {"head_dim": 128}}
    checkpoint = "hunyuan_vl"
    family = "hunyuan_vl"
    parts = {"text": ("hunyuan_vl_text", "vlreg-hunyuan-vl"), "vision": ("hunyuan_vl_vision", "vlreg-hunyuan-vl")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 11008,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.patch_size": 16, "vision.spatial_merge_size": 2,
        "projector.mlp.weight.shape": (4096, 4608),
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL}
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"vision": "model.vision_tower", "projector": "model.vision_tower.patch_merger"}}



@pytest.mark.skipif(not hasattr(transformers, "HYV4VLConfig"),
                    reason="hy_v4_vl: not in this transformers release (5.24 adds it)")
class TestHyV4VL(PublishedWidths):
    """``HYV4VLConfig()``'s defaults (no published checkpoint was at hand): 78 text blocks 6144
    wide over 4 hyper-connection streams, latent attention of 64 heads (queries through a
    2048-wide latent, keys and values through a 512-wide one), a DSA indexer on ``"full"``
    blocks reused by the ``"shared"`` ones after them (block 2 reuses block 1's), a dense first
    block then 8 of 256 routed experts; HunYuan-VL's tower, 40 blocks 1536 wide of 16 heads, its
    merger straight to 6144."""

    config = getattr(transformers, "HYV4VLConfig", None)
    checkpoint = "hy_v4_vl"
    family = "hunyuan_vl"
    parts = {"text": ("hy_v4_vl_text", "vlreg-hunyuan-vl"), "vision": ("hy_v4_vl_vision", "vlreg-hunyuan-vl")}
    published = {
        "num_layers": 78, "hidden_size": 6144, "vocab_size": 120832, "layers.0.num_streams": 4,
        "layers.0.self_attn.num_heads": 64, "layers.0.self_attn.q_lora_rank": 2048,
        "layers.0.self_attn.kv_lora_rank": 512,
        "layers.0.mlp.intermediate_size": 18432, "layers.1.mlp.num_experts": 256, "layers.1.mlp.top_k": 8,
        "vision.num_layers": 40, "vision.vision_hidden_size": 1536, "vision.num_heads": 16, "vision.head_dim": 96,
        "vision.patch_size": 16, "vision.spatial_merge_size": 2, "projector.proj_out.weight.shape": (6144, 6144, 1, 1),
    }
    refused = {**TestHunYuanVL.refused,
               **{f"layers.{k}.self_attn.indexer_scores": "this block runs no indexer"
                  for k, kind in enumerate(config().text_config.indexer_types if config else ()) if kind == "shared"}}
    aliases = TestHunYuanVL.aliases

    def test_the_shared_blocks_reuse_the_selection_before_them(self, model):
        assert model.layers[1].self_attn.reused_by() == [2, 3, 4] and model.layers[2].self_attn.reused_by() == []
        assert "reuses block 1's selection" in model.support()["layers.2.self_attn.indexer_scores"]
