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

import json

import pytest
import transformers

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

CONFIGS = {"blip-2": (transformers.Blip2Config, transformers.Blip2Processor),
           "instructblip": (transformers.InstructBlipConfig, transformers.InstructBlipProcessor),
           "instructblipvideo": (transformers.InstructBlipVideoConfig, transformers.InstructBlipVideoProcessor)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def published(request, tmp_path_factory):
    family, folder = request.param, tmp_path_factory.mktemp(request.param)
    config_class, processor_class = CONFIGS[family]
    tiny = transformers.AutoProcessor.from_pretrained(build(family))
    parts = {"qformer_tokenizer": tiny.qformer_tokenizer} if family.startswith("instructblip") else {}
    side = {"height": 224, "width": 224}
    if family == "instructblipvideo":
        parts["video_processor"] = transformers.InstructBlipVideoVideoProcessor(size=side)
        token = {"video_token_index": tiny.tokenizer.convert_tokens_to_ids("<video>")}
    else:
        parts["image_processor"] = transformers.BlipImageProcessor(size=side)
        token = {"image_token_index": tiny.tokenizer.convert_tokens_to_ids("<image>")}
    processor_class(tokenizer=tiny.tokenizer, num_query_tokens=32, **parts).save_pretrained(folder)
    config = config_class(**token)
    config.save_pretrained(folder)
    return family, folder


def test_the_published_widths_on_meta(published):
    family, folder = published
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "blip"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == (12, 768, 12, 12, 64)
    assert model.intermediate_size == 3072  # fc2's input, OPT's ffn_dim
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size) == (
        39, 1408, 16, 88, 6144)
    assert (vision.image_size, vision.patch_size, vision.class_tokens) == (224, 14, 1)
    qformer = vision.qformer
    assert (qformer.num_layers, qformer.qformer_hidden_size, qformer.num_query_tokens) == (12, 768, 32)
    assert qformer.cross_attention_layers == [0, 2, 4, 6, 8, 10]
    assert tuple(model.projector.weight.shape) == (768, 768)  # the Q-Former's width to the text model's
    assert tuple(model._module.query_tokens.shape) == (1, 32, 768)
    rows = model.support()
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    assert list(model.read_only()) == ["vision.image_token_mask"]

    # the published processor: 32 query tokens an image, each box the whole image, whatever its size
    for size in ((1024, 768), (224, 224), (300, 2000)):
        (geometry,) = vision.geometry("Question: what is this? Answer:", [image(*size)])
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns) == (1, 32) and grid.boxes.tolist() == [[0.0, 0.0, *size]] * 32


def test_inspect_reads_the_config_alone(published, tmp_path, capsys):
    family, _ = published
    CONFIGS[family][0]().save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "blip" and report["parts"]["text"]["model_type"] == "opt"
    assert "vlreg-blip" in report["parts"]["vision"]["plugin"]
    assert report["aliases"]["model"]["projector"] == "language_projection"
    assert report["sizes"]["num_layers"] == 12
