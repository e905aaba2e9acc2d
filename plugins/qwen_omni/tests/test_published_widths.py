"""The omni thinkers at their published widths and full depth, built on the meta device
(no weights): the names, sizes and support table a real checkpoint's thinker gets.

transformers' defaults are not the published thinkers' throughout, so the fields that
differ are written here, from the published checkpoints' configs:

* Qwen/Qwen2.5-Omni-7B: the text defaults are its thinker's (Qwen2-7B's widths); its tower
  is Qwen2.5-VL-7B's, 1280 wide (``Qwen2_5OmniVisionEncoderConfig`` defaults to 3584):
  32 blocks of 16 heads, MLPs 3420 wide, merged to 3584, windows of 112 pixels, full
  attention on blocks 7, 15, 23 and 31;
* Qwen/Qwen3-Omni-30B-A3B-Instruct: its thinker's text model is Qwen3-30B-A3B's (the
  defaults are 28 blocks and a 3584-token vocabulary, no published one): 48 blocks 2048
  wide, 32 query heads of 128 over 4 key/value heads, 128 experts, 8 a token, each 768
  wide, a vocabulary of 152064; its tower is the default (Qwen3-VL's: 27 blocks 1152 wide,
  DeepStack taps after blocks 8, 16, 24), merged to the text model's 2048.
"""

import transformers

from vlreg.plugin import MoeMlp
from vlreg.testing.conformance import PublishedWidths

QWEN2_5_OMNI_7B_VISION = {"hidden_size": 1280, "depth": 32, "num_heads": 16, "intermediate_size": 3420,
                          "out_hidden_size": 3584, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]}
QWEN3_OMNI_30B_TEXT = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
                       "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
                       "moe_intermediate_size": 768, "vocab_size": 152064}


PER_CALL = "once per image"
REFUSED = {"vision.self_attn.attention_scores": PER_CALL, "vision.self_attn.attention_probabilities": PER_CALL,
           "audio": "audio is not served"}  # the claim's refusals


class TestQwen2_5Omni7BThinker(PublishedWidths):
    config = transformers.Qwen2_5OmniThinkerConfig
    fields = {"vision_config": QWEN2_5_OMNI_7B_VISION}
    checkpoint = "qwen2_5_omni_thinker"
    family = "qwen_omni"
    published = {
        "family.entry.operation": "inputs_embeds_masked_scatter_1",
        "num_layers": 28, "hidden_size": 3584, "num_heads": 28, "num_kv_heads": 4, "head_dim": 128,
        "intermediate_size": 18944, "vocab_size": 152064,
        "vision.num_layers": 32, "vision.vision_hidden_size": 1280, "vision.num_heads": 16, "vision.head_dim": 80,
        "vision.intermediate_size": 3420, "vision.window_size": 112, "vision.patch_size": 14,
    }
    refused = REFUSED


class TestQwen3Omni30BA3BThinker(PublishedWidths):
    config = transformers.Qwen3OmniMoeThinkerConfig
    fields = {"text_config": QWEN3_OMNI_30B_TEXT, "vision_config": {"out_hidden_size": 2048}}
    checkpoint = "qwen3_omni_moe_thinker"
    family = "qwen_omni"
    published = {
        "num_layers": 48, "hidden_size": 2048, "num_heads": 32, "num_kv_heads": 4, "head_dim": 128, "vocab_size": 152064,
        "layers.0.mlp.num_experts": 128, "layers.0.mlp.top_k": 8, "layers.0.mlp.intermediate_size": 768,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.intermediate_size": 4304,
        "vision.patch_size": 16,
    }
    refused = {
        **REFUSED,
        "vision.position_embeddings": "not served on this family yet",
        "vision.deepstack_features": "not served on this family yet",
        "mlp.shared_expert_output": "no shared expert",
        **{f"layers.{k}.deepstack_output": "not served on this family yet" for k in range(3)},
        **{f"layers.{k}.deepstack_output": "feed layers[0] to layers[2] only" for k in range(3, 48)},
    }

    def test_every_block_routes(self, model):
        assert all(isinstance(block.mlp, MoeMlp) for block in model.layers)
