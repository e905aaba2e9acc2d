"""What DeepSeek-OCR 2 adds: an image larger than a tile is cut into local tiles, run through
the tower after its global view (a second call), and written in before it, then the
``view_separator`` row; the geometry counts those tokens, the projector serves both calls,
the tower's values are refused by name in such a trace."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat, load
from vlreg.testing.conformance import image

#: Cut into 3 x 2 tiles of 156 pixels (the tiling rule's choice for 3:2), plus the global view.
TILED = (300, 200)


@pytest.fixture(scope="module")
def model():
    return load("deepseek_ocr2")


def _tokens(model, prompt, pictures):
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    return encoding, int((encoding["input_ids"] == model.image_token_id).sum())


def test_the_geometry_counts_the_mask_s_tokens_tiles_global_view_and_separator(model):
    prompt = chat(model, images=2)
    pictures = [image(*TILED), image(112, 84, seed=1)]
    encoding, tokens = _tokens(model, prompt, pictures)
    tiled, plain = model.vision.geometry(prompt, pictures)
    assert [grid.label for grid in tiled.grids] == [*(f"tile {r},{c}" for r in range(2) for c in range(3)), "global",
                                                    "view separator"]
    assert [grid.tokens for grid in tiled.grids] == [144] * 6 + [256, 1]
    assert [grid.label for grid in plain.grids] == ["global", "view separator"]
    assert sum(geometry.tokens for geometry in (tiled, plain)) == tokens == int(encoding["num_local_patches"][0]) * 144 + 2 * 257
    assert all(grid.resampled for grid in tiled.grids)
    assert torch.isnan(tiled.grids[-1].boxes).all()
    # each tile stands for its cell of the image, the global view for the whole
    assert tiled.grids[4].boxes[0].tolist() == [100.0, 100.0, 200.0, 200.0]
    assert tiled.grids[6].boxes[0].tolist() == [0.0, 0.0, 300.0, 200.0]


def test_a_tiled_image_s_features_are_its_tiles_then_its_global_view_then_the_separator(model):
    """The projector runs on the global view, then on the tiles; the scatter writes the tiles'
    rows first. An edit of the features reaches the logits, which are the model's own."""
    prompt, pictures = chat(model), [image(*TILED)]
    with model.trace(prompt, images=pictures):
        calls = model.projector.output.save()
        features = model.vision.image_features.save()
        logits = model.logits.save()
    with model.trace(prompt, images=pictures):
        model.vision.image_features[:] = 0
        ablated = model.logits.save()
    global_view, tiles = calls
    assert global_view.shape == (1, 256, model.hidden_size) and tiles.shape == (6, 144, model.hidden_size)
    separator = model._module.model.view_separator
    assert torch.equal(features, torch.cat([tiles.reshape(-1, model.hidden_size), global_view[0], separator[None]]))
    encoding = model.processor(text=prompt, images=pictures, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(logits, model._module(**encoding).logits, rtol=0, atol=0)
    assert not torch.allclose(logits, ablated)


def test_the_tower_s_values_are_refused_by_name_in_a_tiled_trace(model):
    for read in (lambda: model.vision.layers[0].layer_output, lambda: model.vision.tower_output,
                 lambda: model.vision.patch_embeddings):
        with pytest.raises(Unavailable, match="no larger than the image processor's tile_size"):
            with model.trace(chat(model), images=[image(*TILED)]):
                read().save()
