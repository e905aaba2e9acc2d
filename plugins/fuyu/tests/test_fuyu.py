"""What is particular to Fuyu beyond the conformance suite: the tokenizer the processor relies
on, where each token's pixels are, and an image the processor would shrink to nothing."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoProcessor

from vlreg.testing import build
from vlreg.testing.conformance import centres, lit
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
