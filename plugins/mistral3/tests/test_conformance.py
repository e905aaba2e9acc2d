"""Mistral 3 against the conformance suite the core ships.

Two images of different shapes (112 x 84 and 64 x 128) make the tower pad the smaller
one before its convolution and pack both into one row after it."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.native import PIXTRAL, composite


class TestMistral3(AnalysisConformance, VisionConformance):
    checkpoint = "mistral3"
    native = composite(PIXTRAL)
    image_sizes = ((112, 84), (64, 128))


class TestLightOnOcr(AnalysisConformance, VisionConformance):
    """LightOnOCR: the Pixtral tower under LightOnOCR's names on Qwen3 text; no row breaks
    in the prompt, and the projector reads the tower's output (every tower value writable)."""

    checkpoint = "lighton_ocr"
    native = composite(PIXTRAL, vision="model.vision_encoder", projector="model.vision_projection")
    image_sizes = ((112, 84), (64, 128))


class TestMistralLarge4(ExpertsConformance, AnalysisConformance, VisionConformance):
    """Mistral Large 4: the Pixtral tower over latent attention with no query latent, keys and
    values block 1 reuses from block 0, and experts routed by a softmax within groups."""

    checkpoint = "mistral_large4"
    native = composite(PIXTRAL) | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.0.self_attn.kv_a_layernorm": "model.language_model.layers.0.self_attn.kv_a_layernorm",
    }
    unavailable = {"self_attn.query_latents": "q_lora_rank is None", "layers.1.self_attn.kv_latents": "reuses block 0's"}
    renormalized = False  # softmax scores within the best groups, renormalized and scaled (SoftmaxGroupRoutedMoe.route)
    image_sizes = ((112, 84), (64, 128))
