"""dots3.note against the conformance suite the core ships: latent attention gated per head,
an indexed block then a sliding-window one, DeepSeek-V3's experts; a Qwen ViT at
``model.vision_tower`` with experts on its second block, attending once per image."""

from vlreg.testing.conformance import ExpertsConformance, VisionConformance, no_patterns
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per image"


class TestDots3Note(ExpertsConformance, VisionConformance):
    checkpoint = "dots3_note"
    native = composite(QWEN_VIT, projector="model.vision_tower.merger") | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate",
        "layers.0.self_attn.kv_a_layernorm": "model.language_model.layers.0.self_attn.kv_a_layernorm",
    }
    unavailable = {**no_patterns(PER_CALL), "vision.layers.1.mlp.shared_expert_output": "no shared expert",
                   **{f"layers.1.self_attn.{name}": "runs no indexer"
                      for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}}
    renormalized = False  # sigmoid scores within the best groups, renormalized and scaled (GroupRoutedMoe.route)
