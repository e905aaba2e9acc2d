"""Step 3.7, served by vlreg-step3p7: what the suite (`test_conformance.TestStep3p7`) cannot say.

* each image's geometry counts the image tokens at the mask's positions: its global view's
  square grid of tokens;
* an image the processor would cut into local crops (a second tower call) is refused by name
  before the processor runs;
* block 0's attention has other heads than block 1's: the root's count is unavailable, and
  the attention helpers take blocks of one head count;
* an edit of the learned positions reaches the logits.
"""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis import attention_to_images
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "step3p7"
PICTURE = image(112, 84)


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(84, 112, seed=1)]
    geometry = model.vision.geometry(prompt, pictures)
    ids = model.processor(text=prompt, images=pictures, return_tensors="pt")["input_ids"][0]
    (positions,) = torch.nonzero(ids == model._module.config.image_token_id, as_tuple=True)
    assert [g.tokens for g in geometry] == [4, 4]
    assert torch.cat([g.positions for g in geometry]).tolist() == positions.tolist()
    assert [(grid.rows, grid.columns) for g in geometry for grid in g.grids] == [(2, 2), (2, 2)]


def test_an_image_cut_into_crops_is_refused_by_name(model):
    for size in ((200, 100), (300, 300)):
        with pytest.raises(ValueError, match="local crops"):
            with model.trace(chat(model), images=[image(*size)]):
                model.logits.save()


def test_blocks_of_other_head_counts(model):
    assert [block.self_attn.num_heads for block in model.layers] == [2, 4]
    with pytest.raises(Unavailable, match="differ"):
        model.num_heads
    with pytest.raises(Unavailable, match="differ in heads"):
        attention_to_images(model, chat(model), [PICTURE])
    found = attention_to_images(model, chat(model), [PICTURE], layers=[1])
    assert found.weights[0].shape == (1, 4, 4)


def test_an_edit_of_the_positions_reaches_the_logits(model):
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURE]):
        plain = model.logits.save()
    with model.trace(prompt, images=[PICTURE]):
        model.vision.position_embeddings[:] = 0
        edited = model.logits.save()
    assert not torch.allclose(plain, edited)


def test_a_near_degenerate_image_is_padded_to_a_square(model):
    """A 100 x 20 image is padded at its bottom to 100 x 100 before its view: the view's top row
    of tokens covers it, the bottom row the padding alone."""
    (geometry,) = model.vision.geometry(chat(model), [image(100, 20)])
    boxes = geometry.grids[0].boxes
    torch.testing.assert_close(boxes[:2], torch.tensor([[0, 0, 50, 20], [50, 0, 100, 20]], dtype=boxes.dtype))
    assert boxes[2:].isnan().all()
