"""T5Gemma 2 against the conformance suite the core ships.

The image's features enter the encoder's input embeddings (`StandardizedTransformer.prompt_entry`);
the decoder's blocks attend once over their own positions and the encoder's
(`vlreg.plugin.MergedAttention`, whose interior the suite checks along the joined keys);
both stacks' blocks are sandwich-normed, read at their post-norms, so the plain sum holds."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

SIGLIP = "model.encoder.vision_tower"
NATIVE = {
    "layers": "model.decoder.layers",
    "embed_tokens": "model.encoder.text_model.embed_tokens",
    "norm": "model.decoder.norm",
    "lm_head": "lm_head",
    "encoder": "model.encoder.text_model",
    "encoder.layers": "model.encoder.text_model.layers",
    "layers.0.input_layernorm": "model.decoder.layers.0.pre_self_attn_layernorm",
    "layers.0.post_attention_layernorm": "model.decoder.layers.0.post_self_attn_layernorm",
    "vision": SIGLIP,
    "projector": "model.encoder.multi_modal_projector",
    "vision.layers": f"{SIGLIP}.encoder.layers",
    "vision.patch_embed": f"{SIGLIP}.embeddings.patch_embedding",
    "vision.norm": f"{SIGLIP}.post_layernorm",
}


class TestT5Gemma2(AnalysisConformance, VisionConformance):
    checkpoint = "t5gemma2"
    native = NATIVE
