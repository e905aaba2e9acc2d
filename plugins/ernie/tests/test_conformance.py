"""ERNIE 4.5-VL-MoE against the conformance suite the core ships: the Qwen ViT at
``model.vision_tower`` (its attention once per image, so a tower block's pattern is refused as
on the Qwen lines; `tower_patterns` computes each call's), the resampler as the projector, and
the experts chosen by modality (`ModalityExpertsConformance`)."""

from vlreg.testing.conformance import AnalysisConformance, ModalityExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per image"


class TestErnie4_5_VLMoe(ModalityExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "ernie4_5_vl_moe"
    native = composite(QWEN_VIT, projector="model.resampler_model") | {
        "layers.1.mlp.text_experts": "model.language_model.layers.1.mlp.text_moe",
        "layers.1.mlp.vision_experts": "model.language_model.layers.1.mlp.vision_moe",
    }
    unavailable = no_patterns(PER_CALL)
    image_sizes = ((112, 84), (56, 112))
