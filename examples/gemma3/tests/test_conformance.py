"""Gemma 3 against vlreg's conformance suite, run on the installed plugin."""

from vlreg.testing.conformance import VisionConformance

TOWER = "model.vision_tower"


class TestGemma3(VisionConformance):
    """Sandwich-normed text blocks, whose attention and MLP outputs are read after their
    post-norms, so the plain sum holds; a SigLIP tower served by vlreg-llava."""

    checkpoint = "gemma3"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.norm",
        "lm_head": "lm_head",
        "vision": TOWER,
        "projector": "model.multi_modal_projector",
        "vision.layers": f"{TOWER}.encoder.layers",
        "vision.patch_embed": f"{TOWER}.embeddings.patch_embedding",
        "vision.norm": f"{TOWER}.post_layernorm",
        "vision.layers.0.input_layernorm": f"{TOWER}.encoder.layers.0.layer_norm1",
        "vision.layers.0.post_attention_layernorm": f"{TOWER}.encoder.layers.0.layer_norm2",
    }
