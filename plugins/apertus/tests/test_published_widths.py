"""Apertus 1.5 at its published widths and full depth, built on the meta device (no
weights), its geometry at the published processor's settings, and `vlreg inspect` of the
config alone.

transformers' default config is the docstring's checkpoint (swiss-ai/Apertus-v1.5-8B),
read from the class: 32 blocks 4096 wide, 32 heads (as many key/value heads), an MLP of
14336, a vocabulary of 266752 (text, then the visual and the audio codes); a vision
tokenizer of 131072 codes 256 wide whose encoder has five stages (a code is 16 x 16
pixels), latents 256 wide. ``Apertus1p5ImageProcessor()`` resizes to multiples of 16
between 128 x 128 and 1400 x 1400 pixels.

The published tokenizer's placeholder ids are not the tiny one's: the config takes the tiny
tokenizer's ``<|image|>`` and ``<|audio|>`` ids, the rest is the published config's.
"""

import pytest

pytest.importorskip("transformers.models.apertus1p5", reason="apertus1p5: not in this transformers release (5.24 adds it)")

import transformers  # noqa: E402

from vlreg.testing import build, chat  # noqa: E402
from vlreg.testing.conformance import PublishedWidths, image  # noqa: E402
from vlreg_apertus.checkpoints import AUDIO, IMAGE  # noqa: E402

#: {(width, height): (rows, columns)} of codes at the published processor's settings
GRIDS = {(1024, 768): (48, 64), (512, 512): (32, 32), (100, 700): (44, 6), (2000, 1000): (61, 123)}


class TestApertus1p5_8B(PublishedWidths):
    config = transformers.Apertus1p5Config
    checkpoint = "apertus1p5"
    family = "apertus"
    parts = {"vision": ("apertus1p5_vision_tokenizer", "vlreg-apertus"), "text": ("apertus1p5_text", "vlreg-apertus")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 14336, "vocab_size": 266752,
        "vision.num_layers": 0, "vision.vision_hidden_size": 256, "vision.patch_size": 16,
        "vision.codebook_size": 131072, "projector.embedding.weight.shape": (131072, 256),
    }
    refused = {"vision.patch_embeddings": "no patch embedding", "audio": "audio is not served"}
    read_only = ["vision.image_token_mask"]
    aliases = {"model": {"vision": "model.vision_tokenizer.encoder", "projector": "model.vision_tokenizer.quantize"}}

    def published_config(self, tokenizer=None):
        tokenizer = tokenizer or transformers.AutoProcessor.from_pretrained(build(self.checkpoint)).tokenizer
        return self.config(image_token_id=tokenizer.convert_tokens_to_ids(IMAGE),
                           audio_token_id=tokenizer.convert_tokens_to_ids(AUDIO))

    def published_processor(self, tokenizer):
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        return transformers.Apertus1p5Processor(image_processor=transformers.Apertus1p5ImageProcessor(),
                                                feature_extractor=transformers.WavTokenizerFeatureExtractor(),
                                                tokenizer=tokenizer, chat_template=tiny.chat_template)

    def prompt(self, model):
        return chat(model)

    def test_the_codes_at_the_published_processors_settings(self, model):
        for size, (rows, columns) in GRIDS.items():
            (geometry,) = model.vision.geometry(self.prompt(model), [image(*size)])  # checked against the encoding
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns) == (rows, columns) and geometry.tokens == rows * columns, size
