"""Qwen2-VL against the conformance suite the core ships."""

import torch

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

PER_CALL = "once per image"


class TestQwen2VL(AnalysisConformance, VisionConformance):
    checkpoint = "qwen2_vl"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": "model.visual",
        "vision.layers": "model.visual.blocks",
        "vision.patch_embed": "model.visual.patch_embed",
        "vision.layers.0.self_attn": "model.visual.blocks.0.attn",
        "vision.layers.0.input_layernorm": "model.visual.blocks.0.norm1",
        "vision.layers.0.post_attention_layernorm": "model.visual.blocks.0.norm2",
        "projector": "model.visual.merger",
    }
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
    }
    image_sizes = ((112, 84), (56, 112))
    processor_options = {"max_pixels": 56 * 56}


class TestQwen2VLBfloat16(TestQwen2VL):
    """The same suite on a bfloat16 load: every identity holds at bfloat16's precision."""

    load_options = {"dtype": torch.bfloat16}
