"""BLIP-2, InstructBLIP and InstructBLIP-Video at the published widths, built on the meta
device (no weights).

The widths are transformers 5.23's config defaults, read from the classes, not recalled:
``Blip2Config()``, ``InstructBlipConfig()`` and ``InstructBlipVideoConfig()`` all pair the EVA ViT-g tower (39 blocks, 1408
wide, 16 heads, 14-pixel patches of a 224-pixel image: 256 patches and a class token) with a
Q-Former of 12 blocks, 768 wide, cross-attending on every second block, 32 learned queries,
and OPT-125m's widths for the text model (12 blocks, 768 wide, 12 heads); the default configs
name no image token, so the tiny tokenizer's ``<image>`` (InstructBLIP-Video's ``<video>``) is
given. The processor is the published one's: 224-pixel images (a clip's frames, on
InstructBLIP-Video), 32 queries an image.
"""

import transformers

from vlreg.testing import build
from vlreg.testing.conformance import PublishedWidths, image


class TestBlip2(PublishedWidths):
    config = transformers.Blip2Config
    processor_class = transformers.Blip2Processor
    checkpoint = "blip-2"
    family = "blip"
    parts = {"text": ("opt", "vlreg-blip"), "vision": ("blip_2_vision_model", "vlreg-blip")}
    published = {
        "num_layers": 12, "hidden_size": 768, "num_heads": 12, "num_kv_heads": 12, "head_dim": 64,
        "intermediate_size": 3072,  # fc2's input, OPT's ffn_dim
        "vision.num_layers": 39, "vision.vision_hidden_size": 1408, "vision.num_heads": 16, "vision.head_dim": 88,
        "vision.intermediate_size": 6144, "vision.image_size": 224, "vision.patch_size": 14, "vision.class_tokens": 1,
        "vision.qformer.num_layers": 12, "vision.qformer.qformer_hidden_size": 768, "vision.qformer.num_query_tokens": 32,
        "vision.qformer.cross_attention_layers": [0, 2, 4, 6, 8, 10],
        "projector.weight.shape": (768, 768),  # the Q-Former's width to the text model's
        "_module.query_tokens.shape": (1, 32, 768),
    }
    read_only = ["vision.image_token_mask"]
    aliases = {"model": {"projector": "language_projection"}}

    def published_config(self, tokenizer=None):
        """The defaults name no image token: the tiny tokenizer's ``<image>``."""
        token = {"image_token_index": tokenizer.convert_tokens_to_ids("<image>")} if tokenizer is not None else {}
        return self.config(**token)

    def published_processor(self, tokenizer):
        """The published processor: 224-pixel images, 32 queries an image."""
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        parts = {"qformer_tokenizer": tiny.qformer_tokenizer} if hasattr(tiny, "qformer_tokenizer") else {}
        images = transformers.BlipImageProcessor(size={"height": 224, "width": 224})
        return self.processor_class(image_processor=images, tokenizer=tiny.tokenizer, num_query_tokens=32, **parts)

    def test_32_query_tokens_an_image_each_box_the_whole_image(self, model):
        for size in ((1024, 768), (224, 224), (300, 2000)):
            (geometry,) = model.vision.geometry("Question: what is this? Answer:", [image(*size)])
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns) == (1, 32) and grid.boxes.tolist() == [[0.0, 0.0, *size]] * 32


class TestInstructBlip(TestBlip2):
    config = transformers.InstructBlipConfig
    processor_class = transformers.InstructBlipProcessor
    checkpoint = "instructblip"
    parts = {"text": ("opt", "vlreg-blip"), "vision": ("instructblip_vision_model", "vlreg-blip")}


class TestInstructBlipVideo(TestBlip2):
    config = transformers.InstructBlipVideoConfig
    processor_class = transformers.InstructBlipVideoProcessor
    checkpoint = "instructblipvideo"
    parts = {"text": ("opt", "vlreg-blip"), "vision": ("instructblipvideo_vision_model", "vlreg-blip")}

    def published_config(self, tokenizer=None):
        """The defaults name no video token: the tiny tokenizer's ``<video>``."""
        token = {"video_token_index": tokenizer.convert_tokens_to_ids("<video>")} if tokenizer is not None else {}
        return self.config(**token)

    def published_processor(self, tokenizer):
        """The published processor: a clip's frames at 224 pixels, 32 queries a frame."""
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        frames = transformers.InstructBlipVideoVideoProcessor(size={"height": 224, "width": 224})
        return self.processor_class(video_processor=frames, tokenizer=tiny.tokenizer,
                                    qformer_tokenizer=tiny.qformer_tokenizer, num_query_tokens=32)
