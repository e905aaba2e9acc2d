"""Mllama against the cross-attention conformance suite the core ships.

The tiny checkpoint's 4 text blocks cross-attend at 1 and 3; the default image (112 x 84)
is cut into 2 x 2 tiles of 28 pixels, so the states hold 4 tiles of a class token and
2 x 2 patches: 20 positions.
"""

from vlreg.testing.conformance.cross import CrossAttentionConformance
from vlreg.testing.conformance.native import composite

NATIVE = composite({"layers": "transformer.layers", "global_layers": "global_transformer.layers",
                    "patch_embed": "patch_embedding"}, vision="model.vision_model") | {
    "layers.1.cross_attn": "model.language_model.layers.1.cross_attn",
    "layers.2.self_attn": "model.language_model.layers.2.self_attn",
}


class TestMllama(CrossAttentionConformance):
    checkpoint = "mllama"
    native = NATIVE
    #: The processor writes the BOS before a prompt that lacks it and the bare tokenizer
    #: does not: written out, both encode the text prompt alike.
    text = "<|begin_of_text|>The quick brown fox jumps over the lazy dog."
    #: transformers' Mllama cannot run with its tower on disk (the tower moves its pixels to
    #: its patch embedding's device, the meta device when offloaded): the text blocks go there.
    on_disk = "layers"

    def test_sizes_agree_with_the_weights(self, model):
        """As the suite's, but Mllama's embedding holds 8 rows past the vocabulary, the
        image token the first of them: the readout never predicts it."""
        assert model.num_layers == len(model.layers._module)
        assert tuple(model.embed_tokens.weight.shape) == (model.vocab_size + 8, model.hidden_size)
        assert tuple(model.lm_head.weight.shape) == (model.vocab_size, model.hidden_size)
        assert model._module.config.image_token_id == model.vocab_size
        for index, block in enumerate(model.layers):
            attention = block.cross_attn if index in model.cross_attention_layers else block.self_attn
            assert (attention.num_heads, attention.num_kv_heads, attention.head_dim) == (
                model.num_heads, model.num_kv_heads, model.head_dim
            )
            assert attention.o_proj.weight.shape[1] == model.num_heads * model.head_dim
            assert block.mlp.intermediate_size == model.intermediate_size
