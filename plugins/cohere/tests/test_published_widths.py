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

import json

import pytest
import transformers

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.testing import build
from vlreg.testing.conformance import image

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
CONFIGS = {"aya_vision": transformers.AyaVisionConfig, "cohere2_vision": transformers.Cohere2VisionConfig}
#: text (layers, width, heads, kv heads, head width), tower side in patches, tokens a side of a crop
EXPECTED = {"aya_vision": ((32, 4096, 32, 8, 128), 26, 13), "cohere2_vision": ((64, 12288, 96, 8, 128), 32, 16)}


def processor(family: str, tok):
    """The published processor settings on a tiny tokenizer: Aya's 364-pixel crops (tokens
    of 28 pixels) up to 12 tiles, Command A's 512-pixel crops up to 12 tiles (its image
    processor's defaults)."""
    if family == "aya_vision":
        images = transformers.GotOcr2ImageProcessor(size={"height": 364, "width": 364}, crop_to_patches=True, min_patches=1,
                                                    max_patches=12)
        return transformers.AyaVisionProcessor(image_processor=images, tokenizer=tok)
    return transformers.Cohere2VisionProcessor(image_processor=transformers.Cohere2VisionImageProcessor(),
                                               tokenizer=tok)


@pytest.fixture(scope="module", params=sorted(PUBLISHED))
def published(request, tmp_path_factory):
    """``(family, folder)``: the published config, the tiny tokenizer with the published processor
    settings, the image token id the tiny tokenizer's."""
    family, folder = request.param, tmp_path_factory.mktemp(request.param)
    tok = transformers.AutoProcessor.from_pretrained(build(family)).tokenizer
    processor(family, tok).save_pretrained(folder)
    token = {"image_token_index" if family == "aya_vision" else "image_token_id": tok.convert_tokens_to_ids("<|IMG_PATCH|>")}
    CONFIGS[family](**PUBLISHED[family], **token).save_pretrained(folder)
    return family, folder


def test_the_published_widths_on_meta(published):
    family, folder = published
    model = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "cohere"
    text, side, tokens = EXPECTED[family]
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim) == text
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.head_dim, vision.intermediate_size) == (
        27, 1152, 16, 72, 4304)
    assert vision.image_size // vision.patch_size == side == 2 * tokens
    config = model._module.config
    assert tuple(model.projector.linear_1.weight.shape) == (config.alignment_intermediate_size, 1152 * 2**2)  # 2 x 2 patches a token
    assert tuple(model.projector.linear_2.weight.shape) == (model.hidden_size, config.alignment_intermediate_size // 2)  # SwiGLU halves
    assert model.layers[3].self_attn._module.sliding_window is None and model.layers[0].self_attn._module.sliding_window == 4096
    rows = model.support()
    assert all(reason is None for reason in rows.values()), {row: why for row, why in rows.items() if why}
    expected = ["vision.image_token_mask", "vision.tower_output"] if family == "aya_vision" else ["vision.image_token_mask"]
    assert list(model.read_only()) == expected

    # the published resolution: every crop 13 x 13 (Aya) or 16 x 16 (Command A) tokens of 2 x 2 patches
    for size in ((1024, 768), (300, 2000), (364, 364)):
        prompt = "<image>" if family == "aya_vision" else "<|IMG_PATCH|>"
        (geometry,) = vision.geometry(prompt, [image(*size)])  # the host checks the grids against the encoding's tokens
        crops = model.processor(text=prompt, images=[image(*size)], return_tensors="pt")["pixel_values"].shape[0]
        assert len(geometry.grids) == crops and geometry.tokens == crops * tokens**2, size
        assert all((g.rows, g.columns, g.fold) == (tokens, tokens, 2) for g in geometry.grids)


def test_inspect_reads_the_config_alone(published, tmp_path, capsys):
    family, folder = published
    CONFIGS[family](**PUBLISHED[family]).save_pretrained(tmp_path)
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "cohere" and report["parts"]["text"]["model_type"] == "cohere2"
    assert "vlreg-cohere" in report["parts"]["text"]["plugin"] and "vlreg-llava" in report["parts"]["vision"]["plugin"]
    assert report["aliases"]["model"]["projector"] == "model.multi_modal_projector"
    assert report["sizes"]["num_layers"] == EXPECTED[family][0][0]
