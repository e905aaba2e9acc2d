"""`vlreg.pictures` and ``vlreg demo --out``: scores painted where their tokens are."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer
from vlreg.cli import main
from vlreg.demo import scene
from vlreg.pictures import RAMP, colours, overlay, overlay_grid
from vlreg.testing import build

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "llava_interleave", "llava_1_5", "llava_next")


@pytest.fixture(scope="module")
def processors():
    """Geometry needs the processor and the config only: meta builds, no weights read."""
    return {name: StandardizedTransformer(str(build(name)), task="image-text-to-text") for name in FAMILIES}


def geometry_of(model, picture):
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return model.vision.geometry(prompt, [picture])[0]


@pytest.mark.parametrize("name", FAMILIES)
def test_an_overlay_png_opens_at_the_original_size(processors, name, tmp_path):
    picture = scene(300, 200)
    geometry = geometry_of(processors[name], picture)
    drawn = overlay(picture, geometry, torch.arange(geometry.tokens, dtype=torch.float32), title="token index")
    drawn.save(tmp_path / "overlay.png")
    with Image.open(tmp_path / "overlay.png") as opened:
        assert opened.format == "PNG" and opened.size == picture.size and opened.mode == "RGB"


def test_the_top_score_is_painted_in_the_ramps_top_colour_over_the_image(processors):
    picture = scene(448, 336)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    scores = torch.zeros(geometry.tokens)
    hot = geometry.token_at(100, 200)
    scores[hot] = 1.0
    drawn = overlay(picture, geometry, scores, alpha=0.5, lines=False, bar=False)
    x0, y0, x1, y1 = (round(float(v)) for v in geometry.boxes[hot])
    inside = ((x0 + x1) // 2, (y0 + y1) // 2)
    original = torch.tensor(picture.getpixel(inside), dtype=torch.float32)
    expected = (original * 0.5 + torch.tensor(RAMP[-1], dtype=torch.float32) * 0.5).round()
    assert torch.equal(torch.tensor(drawn.getpixel(inside), dtype=torch.float32), expected)
    cold = geometry.boxes[geometry.token_at(400, 30)]
    cold_pixel = (int(cold[0]) + 5, int(cold[1]) + 5)
    low = (torch.tensor(picture.getpixel(cold_pixel), dtype=torch.float32) * 0.5 + torch.tensor(RAMP[0]) * 0.5).round()
    assert torch.equal(torch.tensor(drawn.getpixel(cold_pixel), dtype=torch.float32), low)


def test_grid_lines_fall_on_the_boxes_edges(processors):
    picture = Image.new("RGB", (448, 336), (0, 0, 0))
    geometry = geometry_of(processors["qwen2_vl"], picture)
    drawn = overlay(picture, geometry, torch.zeros(geometry.tokens), alpha=0.0, bar=False)
    edge = round(float(geometry.boxes[1, 0]))
    row = round(float(geometry.boxes[0, 3])) // 2
    assert drawn.getpixel((edge, row))[0] > 0 and drawn.getpixel((edge + 3, row)) == (0, 0, 0)


def test_what_no_token_sees_is_dimmed(processors):
    """LLaVA-1.5 centre-crops a wide image: its sides reach no token."""
    picture = Image.new("RGB", (300, 100), (200, 200, 200))
    geometry = geometry_of(processors["llava_1_5"], picture)
    drawn = overlay(picture, geometry, torch.zeros(geometry.tokens), alpha=0.0, lines=False, bar=False)
    assert drawn.getpixel((5, 50)) == (90, 90, 90) and drawn.getpixel((150, 50)) == (200, 200, 200)


def test_next_draws_its_tiles_or_its_base(processors):
    picture = scene(300, 200)
    geometry = geometry_of(processors["llava_next"], picture)
    base, tiles = geometry.grids
    assert overlay(picture, geometry, torch.rand(tiles.tokens)).size == picture.size
    assert overlay(picture, geometry, torch.rand(base.tokens), grid=0).size == picture.size
    with pytest.raises(ValueError, match="scores for an image of"):
        overlay(picture, geometry, torch.rand(3))
    with pytest.raises(ValueError, match="geometry is of a"):
        overlay(scene(100, 100), geometry, torch.rand(tiles.tokens))


def test_overlay_grid_lays_panels_out_on_one_scale(processors):
    picture = scene(200, 150)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    titles = [f"layer {i}" for i in range(5)]
    sheet = overlay_grid(picture, geometry, torch.rand(5, geometry.tokens), titles=titles, columns=3, scale=0.5, gap=4)
    assert sheet.size == (3 * 100 + 2 * 4, 2 * 75 + 4)


def test_colours_run_along_the_ramp():
    ends = colours(torch.tensor([0.0, 1.0, -3.0, 7.0]))
    low, high = list(map(float, RAMP[0])), list(map(float, RAMP[-1]))
    assert ends.tolist() == [low, high, low, high]


def test_demo_out_draws_the_toy_models_answer_on_its_target(tmp_path, capsys):
    """The demo's occlusion picture is hottest on the asked shape's token: the ramp's top
    colour blended over the scene there, at the zoomed size, and its summary says so."""
    from vlreg.demo import ZOOM, demo_scene

    assert main(["demo", "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    assert str(tmp_path.resolve()) in said
    written = sorted(tmp_path.glob("*.png"))
    assert {path.name for path in written} >= {"logit-lens.png", "occlusion.png", "patching.png", "attention.png", "tower.png",
                                              "dictionary.png"}
    example = demo_scene()
    assert f"answer: {example.answer!r}" in said and f"on the {example.shape}" in said
    assert f"dictionary on layers[0].layer_output (128 features): the most active at the {example.shape}'s token" in said
    x0, y0, x1, y1 = example.target_box
    x, y = (x0 + x1) // 2, (y0 + y1) // 2
    under = torch.tensor(example.image.getpixel((x, y)), dtype=torch.float32)
    with Image.open(tmp_path / "occlusion.png") as drawn:
        assert drawn.size == (example.image.width * ZOOM, example.image.height * ZOOM)
        hot = torch.tensor(drawn.getpixel((x * ZOOM + 1, y * ZOOM + 1)), dtype=torch.float32)
    expected = under * 0.45 + torch.tensor(RAMP[-1], dtype=torch.float32) * 0.55
    assert (hot - expected).abs().max() <= 1
