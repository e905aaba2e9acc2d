"""`vlreg.pictures`: scores painted where their tokens are, framed by a title, a labelled
colour bar and a caption outside the image. (``vlreg demo --out`` is tests/test_demo.py.)"""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer
from vlreg.demo import scene
from vlreg.pictures import MARK, RAMP, caption, colours, number, overlay, overlay_grid
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


def pixels(picture: Image.Image) -> np.ndarray:
    return np.asarray(picture.convert("RGB"))


@pytest.mark.parametrize("name", FAMILIES)
def test_an_overlay_png_opens_at_the_original_size(processors, name, tmp_path):
    """Bare (no title, bar or caption) it is the image's size; framed, the image's pixels
    are all there, at ``info["origin"]``, and the frame is only around them."""
    picture = scene(300, 200)
    geometry = geometry_of(processors[name], picture)
    scores = torch.arange(geometry.tokens, dtype=torch.float32)
    bare = overlay(picture, geometry, scores, bar=False)
    bare.save(tmp_path / "overlay.png")
    with Image.open(tmp_path / "overlay.png") as opened:
        assert opened.format == "PNG" and opened.size == picture.size and opened.mode == "RGB"
    framed = overlay(picture, geometry, scores, title="token index", label="index (tokens)", caption="a caption")
    x, y = framed.info["origin"]
    assert framed.width > picture.width and framed.height > picture.height and x >= 0 and y > 0
    assert (pixels(framed.crop((x, y, x + picture.width, y + picture.height))) == pixels(bare)).all()


def test_the_title_bar_and_caption_leave_the_images_top_row_and_right_column_alone(processors):
    """What the issue found: the title band and the colour bar drawn over the picture's
    top row and right column. Each part of the frame changes only pixels outside it."""
    picture = scene(448, 336)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    scores = torch.rand(geometry.tokens, generator=torch.Generator().manual_seed(0))
    framed = overlay(picture, geometry, scores, title="a long title " * 8, label="drop of the logit (logits)",
                     caption="model (qwen2_vl) · What is in this image?")
    x, y = framed.info["origin"]
    inside = pixels(framed)[y : y + picture.height, x : x + picture.width]
    assert (inside == pixels(overlay(picture, geometry, scores, bar=False))).all()
    assert (pixels(framed)[: y] != 255).any()                                # the title is above
    assert (pixels(framed)[y : y + picture.height, x + picture.width :] != 255).any()   # the bar is to the right
    assert (pixels(framed)[y + picture.height :] != 255).any()               # the caption is below
    other = overlay(picture, geometry, scores, title="a long title " * 8, label="another label",
                    caption="model (qwen2_vl) · What is in this image?")
    changed = (pixels(other) != pixels(framed)).any(-1).nonzero()
    assert changed[1].min() >= x + picture.width   # the label is the bar's, right of the image


def test_one_number_format():
    assert [number(v) for v in (0.043412, 6.7612, 0.0, -0.0, 1234.5, -0.5, 12.0)] == \
        ["0.0434", "6.76", "0", "0", "1.23e+03", "-0.5", "12"]


def test_the_colour_bar_is_numbered_at_its_ends_in_that_format(processors):
    """Two scales whose ends differ in the third digit draw different bars (and the same
    image): the numbers are the scale's, three significant digits."""
    picture = scene(200, 150)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    scores = torch.zeros(geometry.tokens)
    a = overlay(picture, geometry, scores, low=0.0, high=0.0434)
    b = overlay(picture, geometry, scores, low=0.0, high=0.0435)
    c = overlay(picture, geometry, scores, low=0.0, high=0.04341)   # the same at three digits
    assert (pixels(a) != pixels(b)).any() and (pixels(a) == pixels(c)).all()


def test_a_caption_names_the_model_and_the_prompt(processors):
    model = processors["qwen2_vl"]
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    found = caption(model, prompt)
    assert found.startswith(f"{build('qwen2_vl').name} (qwen2_vl) · ")
    assert "What is in this image?" in found and "<|" not in found and "\n" not in found


def test_the_query_token_is_outlined(processors):
    picture = Image.new("RGB", (448, 336), (0, 0, 0))
    geometry = geometry_of(processors["qwen2_vl"], picture)
    token = geometry.token_at(200, 150)
    drawn = overlay(picture, geometry, torch.zeros(geometry.tokens), alpha=0.0, lines=False, bar=False, mark=token)
    x0, y0, x1, y1 = (round(float(v)) for v in geometry.boxes[token])
    assert drawn.getpixel((x0, (y0 + y1) // 2)) == MARK and drawn.getpixel(((x0 + x1) // 2, y1 - 1)) == MARK
    assert drawn.getpixel(((x0 + x1) // 2, (y0 + y1) // 2)) == (0, 0, 0)
    with pytest.raises(ValueError, match="the grid drawn has tokens 0 to"):
        overlay(picture, geometry, torch.zeros(geometry.tokens), mark=geometry.tokens)


def test_a_picture_shows_itself_in_a_notebook(processors):
    picture = scene(200, 150)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    drawn = overlay(picture, geometry, torch.rand(geometry.tokens), title="t")
    png = drawn._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and Image.open(io.BytesIO(png)).size == drawn.size


def test_the_top_score_is_painted_in_the_ramps_top_colour_over_the_image(processors):
    """Over a grey copy of the image by default (``grey=False``: over its colours)."""
    picture = scene(448, 336)
    geometry = geometry_of(processors["qwen2_vl"], picture)
    scores = torch.zeros(geometry.tokens)
    hot = geometry.token_at(100, 200)
    scores[hot] = 1.0
    x0, y0, x1, y1 = (round(float(v)) for v in geometry.boxes[hot])
    inside = ((x0 + x1) // 2, (y0 + y1) // 2)
    cold = geometry.boxes[geometry.token_at(400, 30)]
    cold_pixel = (int(cold[0]) + 5, int(cold[1]) + 5)
    for grey, under in ((True, picture.convert("L").convert("RGB")), (False, picture)):
        drawn = overlay(picture, geometry, scores, alpha=0.5, lines=False, bar=False, grey=grey)
        original = torch.tensor(under.getpixel(inside), dtype=torch.float32)
        expected = (original * 0.5 + torch.tensor(RAMP[-1], dtype=torch.float32) * 0.5).round()
        assert torch.equal(torch.tensor(drawn.getpixel(inside), dtype=torch.float32), expected)
        low = (torch.tensor(under.getpixel(cold_pixel), dtype=torch.float32) * 0.5 + torch.tensor(RAMP[0]) * 0.5).round()
        assert torch.equal(torch.tensor(drawn.getpixel(cold_pixel), dtype=torch.float32), low)


def test_the_scenes_colours_do_not_tint_the_scores(processors):
    """A purple shape and a grey one of the same brightness under one score are painted the
    same colour: the score's, never a mix with the shape's hue (a purple read as pink)."""
    purple, grey = Image.new("RGB", (224, 224), (128, 0, 128)), Image.new("RGB", (224, 224), (128, 0, 128))
    grey = grey.convert("L").convert("RGB")
    geometry = geometry_of(processors["qwen2_vl"], purple)
    scores = torch.linspace(0, 1, geometry.tokens)
    assert (pixels(overlay(purple, geometry, scores, bar=False)) == pixels(overlay(grey, geometry, scores, bar=False))).all()
    tinted = overlay(purple, geometry, scores, bar=False, grey=False)
    assert (pixels(tinted) != pixels(overlay(grey, geometry, scores, bar=False, grey=False))).any()


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
    assert overlay(picture, geometry, torch.rand(tiles.tokens), bar=False).size == picture.size
    assert overlay(picture, geometry, torch.rand(base.tokens), grid=0, bar=False).size == picture.size
    with pytest.raises(ValueError, match="scores for an image of"):
        overlay(picture, geometry, torch.rand(3))
    with pytest.raises(ValueError, match="geometry is of a"):
        overlay(scene(100, 100), geometry, torch.rand(tiles.tokens))


def test_overlay_grid_lays_panels_out_on_one_scale(processors):
    """Five panels, three to a row, each the scaled painting alone (its title above it),
    all on one scale: a panel of a constant score is the ramp's colour for that value."""
    picture = Image.new("RGB", (200, 150), (0, 0, 0))
    geometry = geometry_of(processors["qwen2_vl"], picture)
    titles = [f"layer {i}" for i in range(5)]
    scores = torch.arange(5.0)[:, None].expand(-1, geometry.tokens)
    sheet = overlay_grid(picture, geometry, scores, titles=titles, columns=3, scale=0.5, gap=4, alpha=1.0,
                         lines=False, label="score (units)", title="five panels")
    panels = sheet.info["panels"]
    assert len(panels) == 5 and all((x1 - x0, y1 - y0) == (100, 75) for x0, y0, x1, y1 in panels)
    assert panels[1][0] - panels[0][2] == 4 and panels[3][0] == panels[0][0] and panels[3][1] > panels[0][3]
    for value, (x0, y0, x1, y1) in enumerate(panels):
        expected = colours(torch.tensor(value / 4)).round().to(torch.uint8).tolist()
        assert sheet.getpixel(((x0 + x1) // 2, (y0 + y1) // 2)) == tuple(expected)
        above = pixels(sheet)[max(0, y0 - 14) : y0, x0:x1]
        assert (above != 255).any()   # its title
