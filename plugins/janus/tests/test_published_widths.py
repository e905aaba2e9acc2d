"""Janus-Pro-1B (and DeepSeek-VL-1.3B, below) at its published widths and full depth, built on the meta device (no
weights), its geometry at the published processor's resolution, and `vlreg inspect` of
the config alone.

transformers' default JanusConfig is the docstring's deepseek-community/Janus-Pro-1B for
the tower (SigLIP-L: 1024 wide, 24 blocks of 16 heads, an MLP of 4 x 1024, 384-pixel
images in 16-pixel patches, 576 tokens), the aligner (2 layers to 2048) and the VQ model
(16384 codes of 8 channels), but its text model is LlamaConfig's default (4096 x 32 over a
vocabulary of 32000), not Janus-Pro-1B's DeepSeek-LLM text model: those fields are
written out below from the published config's ``language_config`` (2048 wide, 24 blocks
of 16 heads, an MLP of 5632, a vocabulary of 102400), as recalled: there is no hub access
here to check them.
"""

import transformers

from vlreg.testing.conformance import PublishedWidths, image

TEXT = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 102400}


SIGLIP_L = {"vision.num_layers": 24, "vision.vision_hidden_size": 1024, "vision.num_heads": 16, "vision.head_dim": 64,
            "vision.intermediate_size": 4096, "vision.patch_size": 16, "vision.image_size": 384, "vision.class_tokens": 0}
DEEPSEEK_LLM = {"num_layers": 24, "hidden_size": 2048, "num_heads": 16, "num_kv_heads": 16, "head_dim": 128}
#: (width, height) -> the tokens over the image (the rest over the padding to a square)
COVERED = {(1024, 768): 24 * 18, (384, 384): 576, (100, 700): 24 * 4}


class Square576:
    """What Janus-Pro-1B and DeepSeek-VL-1.3B share: the tiny tokenizer's image token, and
    576 tokens over the image padded to a square."""

    def published_config(self, tokenizer=None):
        token = {"image_token_id": tokenizer.convert_tokens_to_ids("<image_placeholder>")} if tokenizer is not None else {}
        return self.config(**self.fields, **token)

    def test_576_tokens_over_the_image_padded_to_a_square(self, model):
        for size, covered in COVERED.items():
            (geometry,) = model.vision.geometry(self.prompt, [image(*size)])  # the host checks 576 tokens against the encoding
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns, geometry.tokens) == (24, 24, 576) and int(grid.covered.sum()) == covered


class TestJanusPro1B(Square576, PublishedWidths):
    config = transformers.JanusConfig
    fields = {"text_config": TEXT}
    checkpoint = "janus"
    family = "janus"
    parts = {"vision": ("janus_vision_model", "vlreg-janus"), "text": ("llama", "vlreg-llava")}
    published = {
        **DEEPSEEK_LLM, **SIGLIP_L, "intermediate_size": 5632, "vocab_size": 102400,
        "projector.fc1.weight.shape": (2048, 1024),  # a token per patch
        "_module.model.vqmodel.quantize.embedding.weight.shape": (16384, 8),  # image generation's codes
    }
    refused = {"vision.image_codes": "only to generate images"}
    read_only = ["vision.image_token_mask"]  # the aligner reads the tower's output
    aliases = {"model": {"vision": "model.vision_model", "projector": "model.aligner"}}
    prompt = "<|User|>: <image_placeholder>\nWhat is in this image?\n\n<|Assistant|>:"

    def published_processor(self, tokenizer):
        return transformers.JanusProcessor(image_processor=transformers.JanusImageProcessor(), tokenizer=tokenizer,
                                           use_default_system_prompt=True)

    def test_the_aligners_layers(self, model):
        assert [tuple(layer.weight.shape) for layer in model.projector._module.hidden_layers] == [(2048, 2048)]


#: deepseek-community/deepseek-vl-1.3b-chat, as recalled (no hub access here): DeepSeek-LLM-1.3B
#: text (as Janus-Pro-1B's) and SigLIP-L at 384 pixels in 16-pixel patches. transformers'
#: default DeepseekVLConfig is a SigLIP-B/224 over Llama-2-7B, which is no published checkpoint.
DEEPSEEK_VL = {
    "text_config": TEXT,
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1024, "intermediate_size": 4096,
                      "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 384, "patch_size": 16},
}


class TestDeepseekVL13B(Square576, PublishedWidths):
    config = transformers.DeepseekVLConfig
    fields = DEEPSEEK_VL
    checkpoint = "deepseek_vl"
    family = "janus"
    parts = {"vision": ("siglip_vision_model", "vlreg-llava"), "text": ("llama", "vlreg-llava")}
    published = {**DEEPSEEK_LLM, **SIGLIP_L, "projector.linear1.weight.shape": (2048, 1024),
                 "projector.linear2.weight.shape": (2048, 2048)}
    read_only = ["vision.image_token_mask"]
    prompt = "User: <image_placeholder>\n\nAssistant:"

    def published_processor(self, tokenizer):
        return transformers.DeepseekVLProcessor(image_processor=transformers.DeepseekVLImageProcessor(), tokenizer=tokenizer)


class TestDeepseekVLHybridDefaults(PublishedWidths):
    """DeepseekVLHybridConfig's defaults, read from the class (no published hybrid checkpoint's
    config was at hand): SigLIP-B/224 and Llama-2-7B's widths as DeepseekVLConfig's, and beside
    them SAM ViT-B, the published SAM's (768 wide, 12 blocks of 12 heads, 1024-pixel images in
    16-pixel patches, 14-patch windows, global blocks 2, 5, 8 and 11, a neck of 256 channels)."""

    config = transformers.DeepseekVLHybridConfig
    checkpoint = "deepseek_vl_hybrid"
    family = "janus"
    parts = {"vision": ("siglip_vision_model", "vlreg-llava"), "text": ("llama", "vlreg-llava"),
             "high_res_vision_config": ("sam_vision_model", "vlreg-janus")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "vision.num_layers": 12, "vision.vision_hidden_size": 768,
        "vision.image_size": 224, "vision.patch_size": 16,
        "vision.second_tower.num_layers": 12, "vision.second_tower.vision_hidden_size": 768,
        "vision.second_tower.num_heads": 12, "vision.second_tower.head_dim": 64, "vision.second_tower.patch_size": 16,
        "vision.second_tower.window_size": 14, "vision.second_tower.global_layers": [2, 5, 8, 11],
        "vision.second_tower.output_channels": 256,
        "projector.high_res_vision_proj.weight.shape": (2048, 1024), "projector.vision_proj.weight.shape": (2048, 768),
    }
    refused = None  # the windowed blocks' interior: test_deepseek_vl_hybrid.py checks the table

    def published_config(self, tokenizer=None):
        token = {"image_token_id": tokenizer.convert_tokens_to_ids("<image_placeholder>")} if tokenizer is not None else {}
        return self.config(**token)

    def test_the_windowed_blocks_of_the_second_tower_refuse_their_interior(self, model):
        rows = model.support()
        for block in range(12):
            reason = rows.get(f"vision.second_tower.layers.{block}.self_attn.attention_probabilities")
            assert (reason is None) == (block in (2, 5, 8, 11)), block
