"""The GLM-V line against the conformance suite the core ships."""

from vlreg.testing.conformance import (AnalysisConformance, ExpertsConformance, LinearAttentionConformance,
                                       VisionConformance, no_patterns)
from vlreg.testing.conformance.native import QWEN_VIT, composite

PER_CALL = "once per image"
GLM = composite(QWEN_VIT, vision="model.visual", projector="model.visual.merger") | {
    # the text block's own names: post_attention_layernorm is the norm before the MLP
    "layers.0.post_attention_layernorm": "model.language_model.layers.0.post_attention_layernorm",
}
TOWER_PATTERN = no_patterns(PER_CALL)


class TestGlm4v(AnalysisConformance, VisionConformance):
    """GLM-4.1V: sandwich-normed blocks read at their post-norms, so the plain sum holds."""

    checkpoint = "glm4v"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = GLM
    unavailable = TOWER_PATTERN
    image_sizes = ((112, 84), (56, 112))


class TestGlm4vMoe(ExpertsConformance, VisionConformance):
    """GLM-4.5V: a dense block, then a routed one beside a shared expert."""

    checkpoint = "glm4v_moe"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = {**GLM, "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate"}
    unavailable = TOWER_PATTERN
    renormalized = False  # sigmoid scores, renormalized then scaled by routed_scaling_factor (GroupRoutedMoe.route)


class TestGlm46v(VisionConformance):
    """GLM-4.6V: GLM-4.1V's classes, its parts served by their model types."""

    checkpoint = "glm46v"
    #: transformers' own forward fails with the whole tower on disk (it reads a tower weight's
    #: device or value before accelerate loads it): the tower's blocks go there.
    on_disk = "vision.layers"
    native = GLM
    unavailable = TOWER_PATTERN


class TestGlmga(TestGlm46v):
    """Glmga: GLM-4.6V's model classes (``Glm46VForConditionalGeneration`` over
    ``glm4v_text`` and ``glm4v_vision``) with an image processor of its own."""

    checkpoint = "glmga"
    # the same modules as GLM-4.6V's, whose every value TestGlm46v writes (the suite's
    # slowest test); the processor's side, which differs, runs here in full
    test_every_value_written_reaches_the_logits_or_refuses = None


class TestGlmOcr(VisionConformance):
    """GLM-OCR: GLM-4.1V's text block; a tower with no learned positions, whose attention
    norms its queries and keys."""

    checkpoint = "glm_ocr"
    native = GLM
    unavailable = TOWER_PATTERN


class TestGlm5Next(LinearAttentionConformance, ExpertsConformance, VisionConformance):
    """GLM-5-Next: GLM-OCR's tower over three text blocks (Kimi delta attention, then latent
    attention whose DSA indexer selects the keys, then one reusing that selection) under three
    hyper-connection streams (its own block identity), read out as their mean."""

    checkpoint = "glm5_next"
    native = {**GLM, "layers.0.linear_attn": "model.language_model.layers.0.self_attn",
              "layers.1.mlp.gate": "model.language_model.layers.1.mlp.gate"}
    unavailable = {**TOWER_PATTERN, "layers.2.self_attn.indexer_scores": "reuses block 1's selection"}
    renormalized = False  # sigmoid scores, renormalized then scaled by routed_scaling_factor (GroupRoutedMoe.route)
