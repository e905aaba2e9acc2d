"""Step 3.7 against the conformance suite the core ships: a batch-first layer-scaled tower over
each image's global view, its learned positions interpolated, two convolutions folding 4 x 4
patches into a token; per-block heads gated one by one; MiniMax-M3's sigmoid-routed experts."""

from vlreg.testing.conformance import AnalysisConformance, ExpertsConformance, VisionConformance
from vlreg.testing.conformance.native import composite

TOWER = {
    "layers": "layers",
    "patch_embed": "embeddings.patch_embedding",
    "layers.0.self_attn": "layers.0.self_attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layernorm_before",
    "layers.0.post_attention_layernorm": "layers.0.layernorm_after",
}


class TestStep3p7(ExpertsConformance, AnalysisConformance, VisionConformance):
    checkpoint = "step3p7"
    native = composite(TOWER, vision="model.vision_model") | {
        "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate"}
    renormalized = False  # sigmoid scores plus a correction bias, renormalized (SigmoidRoutedMoe.route)
    unavailable = {"layers.1.mlp.expert_outputs": "a loop over experts"}
    analysis_refuses = {"attention_to_images": "differ in heads"}
    image_sizes = ((112, 84), (84, 112))
    # the embeddings read their position table's weight directly (no module call), which
    # accelerate leaves on the meta device when the tower is offloaded: the blocks go to disk
    on_disk = "vision.layers"
