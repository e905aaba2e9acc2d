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

import json

import pytest
import transformers

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

TEXT = {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 102400}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The published config (the tiny tokenizer's image token id), with the published
    processor's settings on the tiny tokenizer."""
    folder = tmp_path_factory.mktemp("janus-pro-1b")
    tok = transformers.AutoProcessor.from_pretrained(build("janus")).tokenizer
    transformers.JanusProcessor(image_processor=transformers.JanusImageProcessor(), tokenizer=tok,
                                use_default_system_prompt=True).save_pretrained(folder)
    transformers.JanusConfig(text_config=TEXT, image_token_id=tok.convert_tokens_to_ids("<image_placeholder>")).save_pretrained(folder)
    return folder


def test_the_published_widths_on_meta(folder):
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "janus"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (24, 2048, 16, 16, 128)
    assert model.intermediate_size == 5632 and model.vocab_size == 102400
    vision = model.vision
    sizes = (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
             vision.patch_size, vision.image_size, vision.class_tokens)
    assert sizes == (24, 1024, 16, 64, 4096, 16, 384, 0)
    assert tuple(model.projector.fc1.weight.shape) == (2048, 1024)  # a token per patch
    assert [tuple(layer.weight.shape) for layer in model.projector._module.hidden_layers] == [(2048, 2048)]
    assert model._module.model.vqmodel.quantize.embedding.weight.shape == (16384, 8)  # image generation's codes
    rows = model.support()
    assert [row for row, why in rows.items() if why] == ["vision.image_codes"]
    assert list(model.read_only()) == ["vision.image_token_mask"]  # the aligner reads the tower's output
    prompt = "<|User|>: <image_placeholder>\nWhat is in this image?\n\n<|Assistant|>:"
    for size in ((1024, 768), (384, 384), (100, 700)):
        (geometry,) = vision.geometry(prompt, [image(*size)])  # the host checks 576 tokens against the encoding
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (24, 24, 576)
        assert int(grid.covered.sum()) == {(1024, 768): 24 * 18, (384, 384): 576, (100, 700): 24 * 4}[size]


def test_inspect_reads_the_config_alone(tmp_path, capsys):
    transformers.JanusConfig(text_config=TEXT).save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "janus" and report["class"] == "JanusForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == "janus_vision_model" and "vlreg-janus" in report["parts"]["vision"]["plugin"]
    assert "vlreg-llava" in report["parts"]["text"]["plugin"]
    assert report["aliases"]["model"]["vision"] == "model.vision_model" and report["aliases"]["model"]["projector"] == "model.aligner"
    assert "only to generate images" in report["support"]["vision.image_codes"]


#: deepseek-community/deepseek-vl-1.3b-chat, as recalled (no hub access here): DeepSeek-LLM-1.3B
#: text (as Janus-Pro-1B's) and SigLIP-L at 384 pixels in 16-pixel patches. transformers'
#: default DeepseekVLConfig is a SigLIP-B/224 over Llama-2-7B, which is no published checkpoint.
DEEPSEEK_VL = {
    "text_config": TEXT,
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1024, "intermediate_size": 4096,
                      "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 384, "patch_size": 16},
}


def test_deepseek_vl_at_the_published_widths_on_meta(tmp_path):
    tok = transformers.AutoProcessor.from_pretrained(build("deepseek_vl")).tokenizer
    transformers.DeepseekVLProcessor(image_processor=transformers.DeepseekVLImageProcessor(), tokenizer=tok).save_pretrained(tmp_path)
    transformers.DeepseekVLConfig(**DEEPSEEK_VL, image_token_id=tok.convert_tokens_to_ids("<image_placeholder>")).save_pretrained(tmp_path)
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "janus"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (24, 2048, 16, 16, 128)
    vision = model.vision
    sizes = (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size,
             vision.patch_size, vision.image_size, vision.class_tokens)
    assert sizes == (24, 1024, 16, 64, 4096, 16, 384, 0)
    assert tuple(model.projector.linear1.weight.shape) == (2048, 1024) and tuple(model.projector.linear2.weight.shape) == (2048, 2048)
    assert all(why is None for why in model.support().values())
    assert list(model.read_only()) == ["vision.image_token_mask"]
    for size in ((1024, 768), (384, 384), (100, 700)):
        (geometry,) = vision.geometry("User: <image_placeholder>\n\nAssistant:", [image(*size)])  # checked against 576 tokens
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (24, 24, 576)
        assert int(grid.covered.sum()) == {(1024, 768): 24 * 18, (384, 384): 576, (100, 700): 24 * 4}[size]
