"""What Unlimited-OCR adds over DeepSeek-OCR 2: every patch a token, each row of tokens ended
by the learned ``image_newline``, the tiles as one raster over the tiled canvas; the geometry
counts those tokens and boxes each, and the features are the projector's rows so arranged."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat, load
from vlreg.testing.conformance import image

#: Cut into 6 x 4 tiles of 48 pixels (3 x 3 tokens each), plus the 64-pixel global view (4 x 4).
TILED = (300, 200)


@pytest.fixture(scope="module")
def model():
    return load("unlimited_ocr")


def test_the_geometry_counts_the_mask_s_tokens_and_boxes_each_cell(model):
    prompt = chat(model, images=2)
    pictures = [image(*TILED), image(48, 36, seed=1)]
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    tiled, plain = model.vision.geometry(prompt, pictures)
    assert [(grid.label, grid.rows, grid.columns) for grid in tiled.grids] == [
        ("tiles", 12, 19), ("global", 4, 5), ("view separator", 1, 1)]
    assert [grid.label for grid in plain.grids] == ["global", "view separator"]
    assert tiled.tokens + plain.tokens == int((encoding["input_ids"] == model.image_token_id).sum())
    tiles = tiled.grids[0].boxes.view(12, 19, 4)
    assert torch.isnan(tiles[:, -1]).all() and not torch.isnan(tiles[:, :-1]).any()
    torch.testing.assert_close(tiles[0, 0], torch.tensor([0.0, 0.0, 300 / 18, 200 / 12], dtype=torch.float64))
    # the global view: the image scaled to 64 x 43 pixels and padded by 10 above, so the first
    # row of 16-pixel tokens holds 6 of its rows; the newline column covers nothing
    square = tiled.grids[1].boxes.view(4, 5, 4)
    assert torch.isnan(square[:, -1]).all() and not torch.isnan(square[:, :-1]).any()
    torch.testing.assert_close(square[0, 0], torch.tensor([0.0, 0.0, 75.0, 6 * 200 / 43], dtype=torch.float64))
    torch.testing.assert_close(square[3, 3, 2:], torch.tensor([300.0, 200.0], dtype=torch.float64))

def test_the_features_are_the_projected_rows_each_row_ended_by_the_newline(model):
    prompt, pictures = chat(model), [image(*TILED)]
    with model.trace(prompt, images=pictures):
        calls = model.projector.output.save()
        features = model.vision.image_features.save()
        logits = model.logits.save()
    global_view, tiles = calls
    assert global_view.shape == (1, 16, model.hidden_size) and tiles.shape == (24, 9, model.hidden_size)
    newline, separator = model._module.model.image_newline, model._module.model.view_separator
    canvas = tiles.view(4, 6, 3, 3, -1).transpose(1, 2).reshape(12, 18, -1)
    expected = [torch.cat([canvas, newline.expand(12, 1, -1)], 1).flatten(0, 1),
                torch.cat([global_view.view(4, 4, -1), newline.expand(4, 1, -1)], 1).flatten(0, 1), separator[None]]
    assert torch.equal(features, torch.cat(expected))
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(logits, model._module(**encoding).logits, rtol=0, atol=0)


def test_the_tower_s_values_are_refused_by_name_in_a_tiled_trace(model):
    with pytest.raises(Unavailable, match="no larger than the image processor's tile_size"):
        with model.trace(chat(model), images=[image(*TILED)]):
            model.vision.layers[0].layer_output.save()
