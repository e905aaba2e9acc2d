"""What LLaVA-OneVision promises beyond the conformance suite: its chat format, the
features' layout (the base crop, the tiles unpadded and shrunk past ``anyres_max_4``,
newline rows; one padded crop and a newline per image when images come as a list per
prompt), the tower's pattern, and the published widths. Every analysis helper runs in
``test_conformance.py``."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoProcessor, LlavaOnevisionConfig

from vlreg import StandardizedTransformer, analysis
from vlreg.cli import main
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "llava_onevision"

PICTURE = image(112, 84)
WIDE = image(168, 112)  # 2 x 3 tiles: 8 x 12 tokens unpadded, shrunk to 6 x 9


def test_chat_template_gives_onevisions_format(model):
    assert chat(model) == "<|im_start|>user <image>\nWhat is in this image?<|im_end|><|im_start|>assistant\n"
    conversation = [
        {"role": "user", "content": [{"type": "text", "text": "Describe."}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A red square."}]},
        {"role": "user", "content": [{"type": "text", "text": "And the circle?"}]},
    ]
    assert model.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False) == (
        "<|im_start|>user <image>\nDescribe.<|im_end|><|im_start|>assistant \nA red square.<|im_end|>"
        "<|im_start|>user \nAnd the circle?<|im_end|><|im_start|>assistant\n"
    )


def _newlines(model, features: torch.Tensor) -> torch.Tensor:
    return (features == model._module.model.image_newline.detach()).all(-1)


@pytest.mark.parametrize("picture", [PICTURE, WIDE, image(56, 56, seed=3)], ids=["112x84", "168x112", "56x56"])
def test_features_are_the_base_then_the_tiles_rows_each_ended_by_a_newline(model, picture):
    """The base crop's 16 projected rows, then the unpadded tiles' grid (shrunk where it
    holds more than 4 tiles' worth of tokens), a newline after each of its rows: where the
    geometry's tiles grid puts its no-pixel column."""
    with model.trace(chat(model), images=[picture]):
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    (geometry,) = model.vision.geometry(chat(model), [picture])
    base, tiles = geometry.grids
    assert torch.equal(features[: base.tokens], projected[0])
    assert torch.equal(_newlines(model, features), geometry.boxes.isnan().all(-1))
    newline = torch.zeros(tiles.rows, tiles.columns, dtype=torch.bool)
    newline[:, -1] = True
    assert torch.equal(~tiles.covered, newline.reshape(-1))
    kept = tiles.rows * (tiles.columns - 1)
    on_tiles = (projected.shape[0] - 1) * base.tokens
    if picture is WIDE:
        assert (tiles.rows, tiles.columns - 1) == (6, 9) and kept < 8 * 12, "the grid was not shrunk"
    else:
        assert kept <= on_tiles


def test_images_given_as_one_prompts_list_are_one_padded_crop_and_a_newline_each(model):
    """With ``batch_num_images`` above 1 OneVision does not tile: each image is padded to
    a square, one crop of 16 tokens, then a newline."""
    prompt, pictures = [chat(model, images=2)], [[PICTURE, image(40, 90, seed=1)]]
    with model.trace(prompt, images=pictures):
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    geometry = model.vision.geometry(prompt, pictures)
    assert [[(g.label, g.tokens) for g in one.grids] for one in geometry] == [[("base", 16), ("newline", 1)]] * 2
    assert projected.shape[0] == 2 and torch.equal(features.reshape(2, 17, -1)[:, :16], projected)
    newline = torch.tensor([g.label == "newline" for one in geometry for g in one.grids for _ in range(g.tokens)])
    assert torch.equal(_newlines(model, features), newline)
    narrow = geometry[1].grids[0].covered.reshape(4, 4)  # 40 x 90 centred on 90 x 90: 25 pixels of padding a side
    assert not narrow[:, [0, 3]].any() and narrow[:, [1, 2]].all()


def test_tower_patterns_are_the_base_crops_probabilities(model):
    found = analysis.tower_patterns(model, chat(model), [PICTURE], layer=1)
    with model.trace(chat(model), images=[PICTURE]):
        pattern = model.vision.layers[1].self_attn.attention_probabilities.save()
    torch.testing.assert_close(found.patterns[0], pattern[0].float())
    assert found.geometry[0].grids[found.grids[0]].label == "base"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onevision-default")
    LlavaOnevisionConfig().save_pretrained(folder)
    return folder


def test_published_widths_on_meta(published, tmp_path):
    """transformers' default config carries llava-onevision's SigLIP (so400m: 26 blocks,
    1152 wide, 384-pixel tiles of 14-pixel patches) and its 6 x 6 tile grids."""
    AutoProcessor.from_pretrained(build("llava_onevision")).save_pretrained(tmp_path)  # nothing is processed on meta
    model = StandardizedTransformer(str(published), task="image-text-to-text", dispatch=False, processor=str(tmp_path))
    vision = model.vision
    sizes = (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.intermediate_size,
             vision.patch_size, vision.image_size, vision.class_tokens)
    assert sizes == (26, 1152, 16, 4304, 14, 384, 0)
    config = model._module.config
    assert (config.vision_aspect_ratio, len(config.image_grid_pinpoints), max(map(max, config.image_grid_pinpoints))) == (
        "anyres_max_9", 36, 2304
    )
    assert model.projector.linear_1.weight.shape[1] == 1152
    assert "edit vision.layers[25].layer_output" in model.read_only()["vision.tower_output"]


def test_inspect_reads_the_config_alone(published, capsys):
    assert main(["inspect", str(published), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["family"] == "llava" and report["class"] == "LlavaOnevisionForConditionalGeneration"
    assert report["parts"]["vision"]["model_type"] == "siglip_vision_model"
    assert report["parts"]["text"]["model_type"] == "qwen2"
    assert (report["vision sizes"]["num_layers"], report["vision sizes"]["image_size"]) == (26, 384)
    assert report["support"]["vision.image_features"] is None


def test_one_token_at_a_time_on_a_two_image_prompt(model):
    """Copies of a prompt in a batch must encode its images as the prompt alone does; as
    a list per copy, OneVision would not tile them (several images in one list), so the
    copies go as one flat list, and each score is that token's own ablation."""
    prompt, pictures = chat(model, images=2), [PICTURE, image(56, 56, seed=2)]
    found = analysis.occlusion(model, prompt, pictures, image=1, batch=16)
    assert found.scores.shape == (found.geometry[1].tokens,)
    for token in (0, 17, found.geometry[1].tokens - 1):
        one = analysis.ablate_image(model, prompt, pictures, image=1, mode="mean", tokens=[token])
        expected = one.clean[found.target] - one.ablated[found.target]
        torch.testing.assert_close(found.scores[token], expected, rtol=1e-4, atol=1e-4)


def test_invokes_keep_each_ones_solo_encoding(model):
    """Several invokes go through the processor together; an invoke of two images (each
    tiled alone, as its solo run has them) must not become one list of two (not tiled)."""
    two, one = [PICTURE, image(56, 56, seed=2)], [WIDE]
    saved: list = []  # made outside the trace: names first bound inside one do not leave it
    with torch.no_grad(), model.trace() as tracer:
        for prompt, pictures in ((chat(model, images=2), two), (chat(model), one)):
            with tracer.invoke(prompt, images=pictures):
                saved.append(model.vision.image_features.save())
    for (prompt, pictures), features in zip(((chat(model, images=2), two), (chat(model), one)), saved):
        with torch.no_grad(), model.trace(prompt, images=pictures):
            expected = model.vision.image_features.save()
        torch.testing.assert_close(features, expected, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="differently together than each invoke alone"):
        with model.trace() as tracer:
            with tracer.invoke([chat(model, images=2)], images=[two]):  # one list of two: not tiled
                pass
            with tracer.invoke(chat(model, images=2), images=two):  # each tiled
                pass
