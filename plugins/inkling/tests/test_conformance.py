"""Inkling 2 against the conformance suite the core ships: blocks that state their own
identity (a group of blocks restarts its stream), the readout declared (softcap module,
vocabulary cut) with the logit lens refused by name, and a packed tower with a class token
before each image, attending once per image (its pattern refused, as the Qwen ViT's)."""

from transformers.models.inkling2 import modeling_inkling2

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import composite

PER_CALL = "once per image"

TOWER = {
    "layers": "layers",
    "patch_embed": "embeddings.patch_embedding",
    "layers.0.self_attn": "layers.0.self_attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layernorm_before",
    "layers.0.post_attention_layernorm": "layers.0.layernorm_after",
}


class Inkling2Suite(AnalysisConformance, VisionConformance):
    """What Inkling 2 and Inkling 2 Loop (tests/test_inkling2_loop.py) tell the suite alike."""

    native = composite(TOWER, projector="model.vision_tower.merger")
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
        "layers.0.attention_mix": "the first block's attention reads its input as it is",
        "mlp.shared_expert_output": "no shared expert",
    }
    analysis_refuses = {helper: "one block's stream alone does not give" for helper in ("logit_lens", "project_on_vocab")}
    image_sizes = ((24, 16), (16, 32))
    supports_sdpa = False


class TestInkling2(Inkling2Suite):
    checkpoint = "inkling2"
    # transformers 5.25 gates the heads inside o_proj, before its own linear map
    o_proj = "o_proj.linear" if hasattr(modeling_inkling2, "Inkling2GatedOutputProjection") else "o_proj"
