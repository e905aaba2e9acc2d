"""Idefics3 and SmolVLM against the conformance suite the core ships.

The default image (112 x 84) is cut into 2 x 2 tiles and a global image on both tiny
checkpoints: 5 frames of 2 x 2 tokens each, so every test runs through the tiles.
"""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

NATIVE = {
    "layers": "model.text_model.layers",
    "embed_tokens": "model.text_model.embed_tokens",
    "norm": "model.text_model.norm",
    "lm_head": "lm_head",
    "vision": "model.vision_model",
    "vision.layers": "model.vision_model.encoder.layers",
    "vision.patch_embed": "model.vision_model.embeddings.patch_embedding",
    "vision.norm": "model.vision_model.post_layernorm",
    "vision.layers.0.self_attn": "model.vision_model.encoder.layers.0.self_attn",
    "vision.layers.0.input_layernorm": "model.vision_model.encoder.layers.0.layer_norm1",
    "vision.layers.0.post_attention_layernorm": "model.vision_model.encoder.layers.0.layer_norm2",
    "projector": "model.connector",
}


class TestIdefics3(AnalysisConformance, VisionConformance):
    """The features reach the embeddings through ``self.inputs_merger(..., image_hidden_states=)``."""

    checkpoint = "idefics3"
    native = NATIVE
    processor_options = {"do_image_splitting": False}  # the global image only: fewer image tokens


class TestSmolVLM(AnalysisConformance, VisionConformance):
    """The features reach the embeddings through ``inputs_embeds.masked_scatter``."""

    checkpoint = "smolvlm"
    native = NATIVE
