"""The InternVL shapes against the conformance suite the core ships."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.native import composite

NATIVE = composite({  # the InternViT's names, from the tower
    "layers": "encoder.layer",
    "patch_embed": "embeddings.patch_embeddings.projection",
    "layers.0.self_attn": "encoder.layer.0.attention",
    "layers.0.mlp": "encoder.layer.0.mlp",
    "layers.0.input_layernorm": "encoder.layer.0.layernorm_before",
    "layers.0.post_attention_layernorm": "encoder.layer.0.layernorm_after",
})


class TestInternVL(AnalysisConformance, VisionConformance):
    """InternVL3's shape: the InternViT on Qwen2 (served by vlreg-llava's claim). The
    112 x 84 image is 2 x 2 tiles and a thumbnail, 80 tokens."""

    checkpoint = "internvl"
    #: InternVLProcessor turns crop_to_patches on over its image processor: off, one tile,
    #: and the geometry must say so too (it once read the processor's default over the option).
    processor_options = {"crop_to_patches": False}
    native = NATIVE
    image_token = "<IMG_CONTEXT>"


class TestInternVL35Moe(ExpertsConformance, TestInternVL):
    """InternVL3.5-30B-A3B's shape: the InternViT on Qwen3-MoE, each token routed to 2
    of 4 experts."""

    checkpoint = "internvl3_5_moe"
    unavailable = {"mlp.shared_expert_output": "no shared expert"}


class TestQianfanOCR(TestInternVL):
    """Qianfan-OCR: the InternViT under other names (its blocks at ``layers``) on Qwen3 (served
    by vlreg-text's claim); its template writes ``<image>``, which the processor expands."""

    checkpoint = "qianfan_ocr"
    native = {
        **{name: path for name, path in NATIVE.items() if not name.startswith("vision.")},
        "vision.layers": "model.vision_tower.layers",
        "vision.patch_embed": "model.vision_tower.embeddings.patch_embeddings.projection",
        "vision.layers.0.self_attn": "model.vision_tower.layers.0.attention",
        "vision.layers.0.mlp": "model.vision_tower.layers.0.mlp",
        "vision.layers.0.input_layernorm": "model.vision_tower.layers.0.layernorm_before",
        "vision.layers.0.post_attention_layernorm": "model.vision_tower.layers.0.layernorm_after",
    }
