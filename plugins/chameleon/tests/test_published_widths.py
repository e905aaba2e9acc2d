"""Chameleon and Emu3 at their published widths and full depth, built on the meta device
(no weights), their geometry at the published processors' settings, and `vlreg inspect`
of the configs alone.

transformers' default configs are the docstrings' checkpoints, read from the classes:

* ``ChameleonConfig()`` is facebook/chameleon-7b's: 32 blocks 4096 wide, 32 heads (as many
  key/value heads), an MLP of 11008, a vocabulary of 65536; a VQ model of 8192 codes 256
  wide, an encoder of five stages from 128 channels (a code is 16 x 16 pixels), latents
  256 wide. ``ChameleonImageProcessor()`` resizes the shorter side to 512 pixels and crops
  the centre 512 x 512: 32 x 32 codes, the processor's 1024 image tokens.
* ``Emu3Config()`` is Emu3-Community/Emu3-Chat-hf's: 32 blocks 4096 wide, 32 query heads
  over 8 key/value heads, an MLP of 14336, a vocabulary of 184622; a VQ model of 32768
  codes 4 wide, an encoder of four stages from 256 channels (a code is 8 x 8 pixels),
  latents 4 wide. ``Emu3ImageProcessor()`` resizes to multiples of 8 between 512 x 512 and
  1024 x 1024 pixels.

The published configs' ``vocabulary_map`` (the whole tokenizer's) is the tiny tokenizer's
here, from which only the image token's id (and Chameleon's image codes' ids) are read.
"""

import transformers

from vlreg.testing import build, chat
from vlreg.testing.conformance import PublishedWidths, image

#: model type -> {(width, height): (rows, code columns)} at the published processor's settings
GRIDS = {
    "chameleon": {(1024, 768): (32, 32), (512, 512): (32, 32), (100, 700): (32, 32)},
    "emu3": {(1024, 768): (96, 128), (512, 512): (64, 64), (100, 700): (170, 25), (2000, 1000): (90, 181)},
}
NO_PATCHES = {"vision.patch_embeddings": "no patch embedding"}


class TestChameleon7B(PublishedWidths):
    config = transformers.ChameleonConfig
    checkpoint = "chameleon"
    family = "chameleon"
    parts = {"vision": ("chameleon_vqgan", "vlreg-chameleon")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128,
        "intermediate_size": 11008, "vocab_size": 65536,
        "vision.num_layers": 0, "vision.vision_hidden_size": 256, "vision.patch_size": 16, "vision.codebook_size": 8192,
        "projector.embedding.weight.shape": (8192, 256),
    }
    refused = NO_PATCHES
    read_only = ["vision.image_token_mask"]
    aliases = {"model": {"vision": "model.vqmodel.encoder", "projector": "model.vqmodel.quantize"}}

    def published_config(self, tokenizer=None):
        """The published ``vocabulary_map`` is the whole tokenizer's: the tiny one's here."""
        tokenizer = tokenizer or transformers.AutoProcessor.from_pretrained(build(self.checkpoint)).tokenizer
        return self.config(vocabulary_map=tokenizer.get_vocab())

    def published_processor(self, tokenizer):
        return transformers.ChameleonProcessor(image_processor=transformers.ChameleonImageProcessor(), tokenizer=tokenizer)

    def prompt(self, model):
        return "What is in this image?<image>"

    def test_the_codes_at_the_published_processors_settings(self, model):
        line_end = int(self.checkpoint == "emu3")  # Emu3 ends each row of codes with an end-of-line id
        for size, (rows, columns) in GRIDS[self.checkpoint].items():
            (geometry,) = model.vision.geometry(self.prompt(model), [image(*size)])  # checked against the encoding
            (grid,) = geometry.grids
            assert (grid.rows, grid.columns) == (rows, columns + line_end), size
            assert int(grid.covered.sum()) == rows * columns, size


class TestEmu3Chat(TestChameleon7B):
    config = transformers.Emu3Config
    checkpoint = "emu3"
    parts = {"vision": ("emu3_vqgan", "vlreg-chameleon")}
    published = {
        "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
        "intermediate_size": 14336, "vocab_size": 184622,
        "vision.num_layers": 0, "vision.vision_hidden_size": 4, "vision.patch_size": 8, "vision.codebook_size": 32768,
        "projector.embedding.weight.shape": (32768, 4),
    }
    refused = {**NO_PATCHES, "vision.decoder": "back into pixels"}  # Emu3's image-generation decoder, by name

    def published_processor(self, tokenizer):
        tiny = transformers.AutoProcessor.from_pretrained(build(self.checkpoint))
        return transformers.Emu3Processor(image_processor=transformers.Emu3ImageProcessor(), tokenizer=tokenizer,
                                          chat_template=tiny.chat_template)

    def prompt(self, model):
        return chat(model)
