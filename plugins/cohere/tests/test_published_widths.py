"""Aya Vision 8B and Command A Vision at their published widths and full depth, built on
the meta device (no weights), their geometry at the published processors' resolution,
and `vlreg inspect` of a config alone.

Neither default config is a published checkpoint's: AyaVisionConfig's default pairs an
8192-wide Cohere2 with a SigLIP of 14 heads over 1152 channels, which does not even build;
Cohere2VisionConfig's pairs the same Cohere2 with a tower of 12 heads and an MLP of 3072.
So both are written out below from the published ``config.json`` files (CohereLabs/
aya-vision-8b: Command R7B's text model and a 364-pixel SigLIP2-so400m; CohereLabs/
command-a-vision-07-2025: Command A's text model and a 512-pixel SigLIP2-so400m in
16-pixel patches), as recalled: there is no hub access here to check them, so a test
relies only on what follows from them (sizes read off the modules, 13 x 13 and 16 x 16
tokens a crop), not on their being exact.
"""

import transformers

from vlreg.testing.conformance import PublishedWidths, image

SIGLIP2 = {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
           "num_attention_heads": 16}
PUBLISHED = {
    "aya_vision": {  # CohereLabs/aya-vision-8b
        "text_config": {"model_type": "cohere2", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 256000, "sliding_window": 4096},
        "vision_config": {**SIGLIP2, "image_size": 364, "patch_size": 14, "vision_use_head": False},
        "alignment_intermediate_size": 28672, "downsample_factor": 2,
    },
    "cohere2_vision": {  # CohereLabs/command-a-vision-07-2025
        "text_config": {"model_type": "cohere2", "hidden_size": 12288, "intermediate_size": 36864, "num_hidden_layers": 64,
                        "num_attention_heads": 96, "num_key_value_heads": 8, "vocab_size": 256000, "sliding_window": 4096},
        "vision_config": {**SIGLIP2, "image_size": 512, "patch_size": 16},
        "alignment_intermediate_size": 36864, "downsample_factor": 2,
    },
}


class TestAyaVision8B(PublishedWidths):
    config = transformers.AyaVisionConfig
    fields = PUBLISHED["aya_vision"]
    checkpoint = "aya_vision"
    family = "cohere"
    parts = {"text": ("cohere2", "vlreg-cohere"), "vision": ("siglip_vision_model", "vlreg-llava")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.image_size": 364, "vision.patch_size": 14,
        "projector.linear_1.weight.shape": (28672, 1152 * 2**2),  # 2 x 2 patches a token
        "projector.linear_2.weight.shape": (4096, 28672 // 2),  # SwiGLU halves
        "layers.3.self_attn._module.sliding_window": None, "layers.0.self_attn._module.sliding_window": 4096,
    }
    read_only = ["vision.image_token_mask", "vision.tower_output"]
    aliases = {"model": {"projector": "model.multi_modal_projector"}}
    token_key, prompt, tokens = "image_token_index", "<image>", 13

    def published_config(self, tokenizer=None):
        """The image token id the tiny tokenizer's."""
        token = {self.token_key: tokenizer.convert_tokens_to_ids("<|IMG_PATCH|>")} if tokenizer is not None else {}
        return self.config(**self.fields, **token)

    def published_processor(self, tokenizer):
        """Aya's 364-pixel crops (tokens of 28 pixels), up to 12 tiles."""
        images = transformers.GotOcr2ImageProcessor(size={"height": 364, "width": 364}, crop_to_patches=True, min_patches=1,
                                                    max_patches=12)
        return transformers.AyaVisionProcessor(image_processor=images, tokenizer=tokenizer)

    def test_every_crop_is_a_square_of_tokens_at_the_published_resolution(self, model):
        """13 x 13 (Aya) or 16 x 16 (Command A) tokens of 2 x 2 patches a crop."""
        assert model.vision.image_size // model.vision.patch_size == 2 * self.tokens
        for size in ((1024, 768), (300, 2000), (364, 364)):
            (geometry,) = model.vision.geometry(self.prompt, [image(*size)])  # checked against the encoding's tokens
            crops = model.processor(text=self.prompt, images=[image(*size)], return_tensors="pt")["pixel_values"].shape[0]
            assert len(geometry.grids) == crops and geometry.tokens == crops * self.tokens**2, size
            assert all((g.rows, g.columns, g.fold) == (self.tokens, self.tokens, 2) for g in geometry.grids)


class TestCommandAVision(TestAyaVision8B):
    config = transformers.Cohere2VisionConfig
    fields = PUBLISHED["cohere2_vision"]
    checkpoint = "cohere2_vision"
    published = {
        "num_layers": 64, "hidden_size": 12288, "num_heads": 96, "num_kv_heads": 8, "head_dim": 128,
        "vision.num_layers": 27, "vision.vision_hidden_size": 1152, "vision.num_heads": 16, "vision.head_dim": 72,
        "vision.intermediate_size": 4304, "vision.image_size": 512, "vision.patch_size": 16,
        "projector.linear_1.weight.shape": (36864, 1152 * 2**2),
        "projector.linear_2.weight.shape": (12288, 36864 // 2),
        "layers.3.self_attn._module.sliding_window": None, "layers.0.self_attn._module.sliding_window": 4096,
    }
    read_only = ["vision.image_token_mask"]
    token_key, prompt, tokens = "image_token_id", "<|IMG_PATCH|>", 16

    def published_processor(self, tokenizer):
        """Command A's 512-pixel crops, up to 12 tiles (its image processor's defaults)."""
        return transformers.Cohere2VisionProcessor(image_processor=transformers.Cohere2VisionImageProcessor(),
                                                   tokenizer=tokenizer)
