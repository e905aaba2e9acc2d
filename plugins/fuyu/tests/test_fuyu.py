"""What is particular to Fuyu beyond the conformance suite: the tokenizer the processor relies
on, where each token's pixels are, and an image the processor would shrink to nothing."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoProcessor

from vlreg.testing import build
from vlreg.testing.conformance import centres, lit, taken_sizes
from vlreg.testing.kit import chat, load


@pytest.fixture(scope="module")
def model():
    return load("fuyu")


def test_the_saved_tokenizer_encodes_as_the_processor_expects():
    """Reloaded from disk: a text prompt starts with ``<s>`` (the tokenizer's template); an
    image's placeholders come with the ``▁`` piece the processor drops, so every patch keeps
    its placeholder, and ``<s>`` follows the image."""
    processor = AutoProcessor.from_pretrained(build("fuyu"))
    tok = processor.tokenizer
    assert tok("What is")["input_ids"][0] == tok.convert_tokens_to_ids("<s>")
    placeholders = tok("|SPEAKER||SPEAKER||NEWLINE|<s>", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(placeholders) == ["▁", "|SPEAKER|", "|SPEAKER|", "|NEWLINE|", "<s>"]


def test_each_tokens_box_holds_its_patchs_pixels(model):
    """A pixel lit at the centre of a token's box lands in that token's patch (the row of
    the processor's patches the token is scattered from), and in no other; the newline
    tokens that end each row of patches are no image tokens."""
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [lit(112, 84, 0, 0)])
    grid = geometry.grids[0]
    for _, _, token, x, y in list(centres(geometry))[:: max(1, grid.tokens // 6)]:
        encoding = model.processor(text=prompt, images=[lit(112, 84, x, y)], return_tensors="pt")
        patches = encoding["image_patches"]
        lit_rows = (patches != patches.amin()).any(-1).nonzero().flatten().tolist()
        assert lit_rows == [token]
    ids = encoding["input_ids"][0]
    newline = model.processor.tokenizer.convert_tokens_to_ids("|NEWLINE|")
    assert int((ids == newline).sum()) == grid.rows
    assert int((ids == model.image_token_id).sum()) == grid.tokens == grid.rows * grid.columns


def test_an_image_shrunk_to_no_pixels_is_refused_first(model):
    with pytest.raises(ValueError, match="a side of no pixels"):
        with model.trace(chat(model), images=[lit(400, 2, 0, 0)]):
            model.logits.save()


#: (width, height): the corners of the range, extreme aspects, and random sizes
SIZES = [(1, 1), (7, 300), (300, 7), (64, 48), (65, 47), (1000, 10), (10, 1000), (640, 480)]
SIZES += [(random.Random(n).randint(8, 700), random.Random(n + 1000).randint(8, 700)) for n in range(22)]


def test_the_grid_is_the_processors_raster_of_patches(model):
    """On sizes that are shrunk or not, the grid has a token per placeholder the processor
    wrote and a row per newline token, its boxes inside the image, the last reaching its
    far corner; a size shrunk to a side of no pixels is refused with its reason."""
    from vlreg_fuyu.geometry import image_grids

    processor = model.processor
    newline = processor.tokenizer.convert_tokens_to_ids("|NEWLINE|")
    for size in taken_sizes(model, chat(model), SIZES):
        picture = lit(*size, 0, 0)
        ids = processor(text=chat(model), images=[picture], return_tensors="pt")["input_ids"][0]
        (grid,) = image_grids(None, [picture], processor)
        assert int((ids == model.image_token_id).sum()) == grid.tokens, size
        assert int((ids == newline).sum()) == grid.rows, size
        boxes = grid.boxes
        assert bool((boxes[:, :2] >= 0).all()) and bool((boxes[:, 2] <= size[0]).all() and (boxes[:, 3] <= size[1]).all())
        torch.testing.assert_close(boxes[-1, 2:], torch.tensor(size, dtype=torch.float64))
