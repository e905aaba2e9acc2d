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

import json

import pytest
import transformers

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

FAMILIES = {
    "chameleon": (transformers.ChameleonConfig, lambda tiny: transformers.ChameleonProcessor(
        image_processor=transformers.ChameleonImageProcessor(), tokenizer=tiny.tokenizer)),
    "emu3": (transformers.Emu3Config, lambda tiny: transformers.Emu3Processor(
        image_processor=transformers.Emu3ImageProcessor(), tokenizer=tiny.tokenizer, chat_template=tiny.chat_template)),
}
#: model type -> (blocks, width, heads, key/value heads, head width, MLP, vocabulary)
TEXT = {"chameleon": (32, 4096, 32, 32, 128, 11008, 65536), "emu3": (32, 4096, 32, 8, 128, 14336, 184622)}
#: model type -> (latent width, cell, codes)
VQ = {"chameleon": (256, 16, 8192), "emu3": (4, 8, 32768)}
#: model type -> {(width, height): (rows, code columns)} at the published processor's settings
GRIDS = {
    "chameleon": {(1024, 768): (32, 32), (512, 512): (32, 32), (100, 700): (32, 32)},
    "emu3": {(1024, 768): (96, 128), (512, 512): (64, 64), (100, 700): (170, 25), (2000, 1000): (90, 181)},
}


def configured(family: str):
    tiny = transformers.AutoProcessor.from_pretrained(build(family))
    config_class, processor = FAMILIES[family]
    return config_class(vocabulary_map=tiny.tokenizer.get_vocab()), processor(tiny)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def published(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    config, processor = configured(request.param)
    processor.save_pretrained(folder)
    config.save_pretrained(folder)
    return request.param, folder


def test_the_published_widths_on_meta(published):
    family, folder = published
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "chameleon"
    sizes = (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim,
             model.intermediate_size, model.vocab_size)
    assert sizes == TEXT[family]
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.patch_size, vision.codebook_size) == (0, *VQ[family])
    assert tuple(model.projector.embedding.weight.shape) == (VQ[family][2], model._module.config.vq_config.embed_dim)
    rows = model.support()
    refused = ["vision.patch_embeddings", "vision.decoder"] if family == "emu3" else ["vision.patch_embeddings"]
    assert [row for row, why in rows.items() if why] == refused  # Emu3's image-generation decoder, by name
    assert list(model.read_only()) == ["vision.image_token_mask"]
    prompt = "What is in this image?<image>" if family == "chameleon" else model.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}],
        add_generation_prompt=True, tokenize=False)
    for size, (rows_, columns) in GRIDS[family].items():
        (geometry,) = vision.geometry(prompt, [image(*size)])  # the host checks the count against the encoding
        (grid,) = geometry.grids
        line_end = int(family == "emu3")
        assert (grid.rows, grid.columns) == (rows_, columns + line_end), size
        assert int(grid.covered.sum()) == rows_ * columns, size


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_inspect_reads_the_config_alone(family, tmp_path, capsys):
    configured(family)[0].save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "chameleon" and report["parts"]["vision"]["model_type"] == f"{family}_vqgan"
    assert "vlreg-chameleon" in report["parts"]["vision"]["plugin"]
    assert report["aliases"]["model"]["vision"] == "model.vqmodel.encoder"
    assert report["aliases"]["model"]["projector"] == "model.vqmodel.quantize"
    assert "no patch embedding" in report["support"]["vision.patch_embeddings"]
    assert report["support"]["vision.image_codes"] is None
