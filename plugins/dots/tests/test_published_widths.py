"""dots3.note at its published widths and full depth, built on the meta device (no weights).

``Dots3NoteConfig()`` is the class's defaults (its docstring names dots-studio/dots3-note-prev;
not checked here against that checkpoint's config.json): 46 text blocks 5120 wide, indexed
blocks of 128 latent heads (a 512-wide key-value latent) and sliding-window blocks of 64 (a
1024-wide one), a dense first block then 8 of 256 experts; a tower of 42 blocks 1536 wide, 25
dense then experts growing from 4 to 64 (``pyramid_num_routed``)."""

import transformers

from vlreg.plugin import GroupRoutedMoe, SparseAttention, VisionMoeMlp
from vlreg.testing.conformance import PublishedWidths

PER_CALL = "once per image"
#: The sliding-window blocks: every block but the indexed ones (0, 1, then every fourth from 5).
SLIDING = [i for i in range(46) if i >= 2 and i % 4 != 1]
NO_INDEXER = {f"layers.{i}.self_attn.{name}": "runs no indexer" for i in SLIDING
              for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}


class TestDots3Note(PublishedWidths):
    config = transformers.Dots3NoteConfig
    checkpoint = "dots3_note"
    family = "dots"
    parts = {"text": ("dots3_note_text", "vlreg-dots"), "vision": ("dots3_note_vision_encoder", "vlreg-dots")}
    published = {
        "num_layers": 46, "hidden_size": 5120, "vocab_size": 152064, "head_dim": 128,
        "layers.0.self_attn.num_heads": 128, "layers.0.self_attn.kv_lora_rank": 512,
        "layers.0.self_attn.q_lora_rank": 1024, "layers.0.self_attn.qk_head_dim": 192,
        "layers.2.self_attn.num_heads": 64, "layers.2.self_attn.kv_lora_rank": 1024,
        "layers.2.self_attn.qk_head_dim": 256, "layers.0.mlp.intermediate_size": 13824,
        "layers.1.mlp.num_experts": 256, "layers.1.mlp.top_k": 8, "layers.1.mlp.intermediate_size": 1536,
        "vision.num_layers": 42, "vision.vision_hidden_size": 1536, "vision.num_heads": 24, "vision.head_dim": 64,
        "vision.layers.0.mlp.intermediate_size": 4224, "vision.layers.25.mlp.num_experts": 4,
        "vision.layers.25.mlp.top_k": 2, "vision.layers.25.mlp.intermediate_size": 2112,
        "vision.layers.41.mlp.num_experts": 64, "vision.patch_size": 14, "vision.spatial_merge_size": 2,
    }
    refused = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL,
               "vision.layers.25-41.mlp.shared_expert_output": "no shared expert", **NO_INDEXER,
               "audio": "not served"}
    read_only = ["vision.image_token_mask", "vision.tower_output"]

    def test_indexed_and_sliding_blocks_and_the_tower_experts(self, model):
        types = model._module.config.text_config.layer_types
        assert all(isinstance(block.self_attn, SparseAttention) for block in model.layers)
        assert [block.self_attn.indexer is not None for block in model.layers[:6]] == [
            kind == "indexed_attention" for kind in types[:6]]
        assert all(isinstance(block.mlp, GroupRoutedMoe) for block in model.layers[1:])
        assert [isinstance(block.mlp, VisionMoeMlp) for block in model.vision.layers] == [False] * 25 + [True] * 17
