"""InternVL at the widths transformers' default config carries (InternVL3's: the
InternViT-300M tower, 448-pixel tiles of 14-pixel patches, a 2 x 2 pixel shuffle), built
on the meta device at full depth (no weights), and `vlreg inspect` of that config."""

import transformers

from vlreg.testing.conformance import PublishedWidths


class TestInternVL3(PublishedWidths):
    config = transformers.InternVLConfig
    checkpoint = "internvl"
    family = "internvl"
    parts = {"vision": ("internvl_vision", "vlreg-internvl"), "text": ("qwen2", "vlreg-llava")}
    published = {
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 4096, "vision.patch_size": 14, "vision.image_size": 448, "vision.class_tokens": 1,
        "projector.linear_1.weight.shape": (4096, 4 * 1024),  # 2 x 2 patches a token
        "_module.config.image_seq_length": (448 // 14 // 2) ** 2,
    }
    read_only = ["vision.image_token_mask"]  # the tower's output is what the projector reads
    aliases = {
        "model": {"vision": "model.vision_tower"},
        "vision": {"patch_embed": "embeddings.patch_embeddings.projection", "layers": "encoder.layer"},
        "vision.layers[0]": {"self_attn": "attention", "input_layernorm": "layernorm_before",
                             "post_attention_layernorm": "layernorm_after"},
    }


class TestQianfanOCR(PublishedWidths):
    """``QianfanOCRConfig()``: the same InternViT-300M widths under Qianfan-OCR's names, on a
    Qwen3 text model; its lazy build runs the drop-path rates' ``linspace`` for real."""

    config = transformers.QianfanOCRConfig
    checkpoint = "qianfan_ocr"
    family = "internvl"
    parts = {"vision": ("qianfan_ocr_vision", "vlreg-internvl"), "text": ("qwen3", "vlreg-text")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 22016,
        "vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
        "vision.intermediate_size": 4096, "vision.patch_size": 14, "vision.image_size": 448, "vision.class_tokens": 1,
        "_module.config.image_seq_length": (448 // 14 // 2) ** 2,
    }
    read_only = ["vision.image_token_mask"]
    aliases = {
        "model": {"vision": "model.vision_tower"},
        "vision": {"patch_embed": "embeddings.patch_embeddings.projection"},
        "vision.layers[0]": {"self_attn": "attention", "input_layernorm": "layernorm_before",
                             "post_attention_layernorm": "layernorm_after"},
    }
