"""T5Gemma 2 at t5gemma-2-270m-270m's widths and full depth, on the meta device (no weights):
the names, sizes and support table such a checkpoint gets, and what ``vlreg inspect`` reads
of its config alone.

``T5Gemma2Config()``'s defaults are no published geometry (a 224-pixel SigLIP of 16-pixel
patches under 256 tokens a side its projector cannot pool), so the fields are written out:
the encoder's and the decoder's text models as the 270M-270M checkpoint's config gives them
(640 wide, 18 blocks of 4 query heads over 1 key/value head of 256, MLPs of 2048; its
fine-tunes' configs carry the same) and Gemma 3's SigLIP-so400m at 896 pixels (1152 wide, 27
blocks of 16 heads, 14-pixel patches: 64 x 64 pooled 4 x 4 to 256 tokens an image), which
T5Gemma 2 inherits. The vocabulary and token ids are transformers' defaults."""

import transformers

from vlreg.testing.conformance import PublishedWidths

TEXT = {"hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256}
SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
          "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 896, "patch_size": 14,
          "vision_use_head": False}


class TestT5Gemma2At270M(PublishedWidths):
    config = transformers.T5Gemma2Config
    fields = {"encoder": {"text_config": TEXT, "vision_config": SIGLIP, "mm_tokens_per_image": 256}, "decoder": TEXT}
    checkpoint = "t5gemma2"
    family = "t5gemma2"
    parts = {"vision": ("siglip_vision_model", "vlreg-llava"), "text": ("t5gemma2_decoder", "vlreg-t5gemma2")}
    published = {
        "num_layers": 18, "encoder.num_layers": 18, "hidden_size": 640, "num_heads": 4, "num_kv_heads": 1,
        "head_dim": 256, "layers.0.mlp.intermediate_size": 2048, "encoder.layers.17.self_attn.num_kv_heads": 1,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16,
        "projector.mm_input_projection_weight.shape": (1152, 640),
    }
