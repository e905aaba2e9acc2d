"""The Qwen3 line against the conformance suite the core ships."""

import pytest

from vlreg.testing import shared_checkpoint
from vlreg.testing.conformance import (
    AnalysisConformance,
    ExpertsConformance,
    LinearAttentionConformance,
    VisionConformance,
)

PER_CALL = "once per image"
QWEN = {
    "layers": "model.language_model.layers",
    "embed_tokens": "model.language_model.embed_tokens",
    "norm": "model.language_model.norm",
    "lm_head": "lm_head",
    "vision": "model.visual",
    "vision.layers": "model.visual.blocks",
    "vision.patch_embed": "model.visual.patch_embed",
    "vision.layers.0.self_attn": "model.visual.blocks.0.attn",
    "vision.layers.0.input_layernorm": "model.visual.blocks.0.norm1",
    "projector": "model.visual.merger",
}


class TestQwen3VL(AnalysisConformance, VisionConformance):
    checkpoint = "qwen3_vl"
    native = QWEN
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
        "layers.2.deepstack_output": "feed layers[0] to layers[1] only",
    }
    image_sizes = ((112, 84), (64, 128))


REAL = shared_checkpoint("Qwen3-VL-4B-Instruct")


@pytest.mark.skipif(
    REAL is None,
    reason="../shared/checkpoints/Qwen3-VL-4B-Instruct is absent: the real checkpoints' metadata lives beside the repository",
)
class TestQwen3VLRealGeometry(TestQwen3VL):
    """The whole suite at Qwen3-VL-4B's widths, token ids and template (3 text blocks, a
    3-block tower tapped after each), in bfloat16."""

    build_options = {"source": str(REAL)} if REAL is not None else {}
    image_sizes = ((256, 256),)
    # occlusion at these widths (a 151k-token readout per copy of the prompt) takes about a
    # minute; every analysis helper runs on the tiny checkpoint above
    test_every_analysis_helper_runs_or_says_why_not = None
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
    }


class TestQwen3VLMoe(ExpertsConformance, TestQwen3VL):
    """Qwen3-VL with every text MLP routing each token to 2 of 4 experts."""

    checkpoint = "qwen3_vl_moe"
    unavailable = {**TestQwen3VL.unavailable, "mlp.shared_expert_output": "no shared expert"}


class TestQwen3_5(LinearAttentionConformance, TestQwen3VL):
    """Linear, full, linear text blocks; a tower with learned positions and no DeepStack."""

    checkpoint = "qwen3_5"
    unavailable = {
        "vision.self_attn.attention_scores": PER_CALL,
        "vision.self_attn.attention_probabilities": PER_CALL,
        "vision.deepstack_features": "no DeepStack taps",
    }


class TestQwen3_5Moe(ExpertsConformance, TestQwen3_5):
    """Qwen3.5 whose MLPs route each token to 2 of 4 experts beside a gated shared expert."""

    checkpoint = "qwen3_5_moe"


class TestCosmos3Omni(TestQwen3VL):
    """Cosmos3 Omni: Qwen3-VL's model classes under another wrapper (DeepStack included),
    its checkpoint saving a Qwen3VLProcessor (transformers maps none to cosmos3_omni)."""

    checkpoint = "cosmos3_omni"
