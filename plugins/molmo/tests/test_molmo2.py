"""Molmo 2, served by vlreg-molmo: what the suite (`test_conformance.TestMolmo2`) cannot say.

* each image's geometry counts the image tokens at the mask's positions: its low-resolution
  view's pooled grid, then its canvas's, each token's box its pooling window over the image;
* the adapter's pooling attention, of the tower's attention class, is no tower attention;
* the projector reads two blocks' streams: the tower's output takes no write;
* on a ``norm_after`` checkpoint each sublayer adds its post-norm's output, so the block's sum holds.
"""

from __future__ import annotations

import pytest
import torch

from vlreg import ReadOnly, StandardizedTransformer
from vlreg.plugin import VisionAttention
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "molmo2"
PICTURE = image(112, 84)


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 56, seed=1)]
    geometry = model.vision.geometry(prompt, pictures)
    ids = model.processor(text=prompt, images=pictures, return_tensors="pt")["input_ids"][0]
    (positions,) = torch.nonzero(ids == model._module.config.image_token_id, as_tuple=True)
    assert torch.cat([g.positions for g in geometry]).tolist() == positions.tolist()
    # 56-pixel crops of 4 x 4 patches pooled 2 x 2; the canvas of 112 x 84 is 6 x 6 patches, of 56 x 56 4 x 4
    assert [[(grid.rows, grid.columns) for grid in g.grids] for g in geometry] == [[(2, 2), (3, 3)], [(2, 2), (2, 2)]]
    boxes = geometry[0].grids[1].boxes
    torch.testing.assert_close(boxes[0], torch.tensor([0, 0, 112 / 3, 28], dtype=boxes.dtype))
    torch.testing.assert_close(boxes[-1], torch.tensor([224 / 3, 56, 112, 84], dtype=boxes.dtype))


def test_the_adapters_pooling_is_no_tower_attention(model):
    assert all(isinstance(block.self_attn, VisionAttention) for block in model.vision.layers)
    assert not isinstance(model.projector.image_pooling_2d, VisionAttention)


def test_the_pattern_says_where_it_is_not_causal(model):
    assert "attend to each other both ways" in repr(model.layers[0].self_attn)


def test_the_tower_output_is_read_only(model):
    with pytest.raises(ReadOnly, match="vision_feature_layer"):
        with model.trace(chat(model), images=[PICTURE]):
            model.vision.tower_output[:] = 0


def test_an_edit_of_the_features_reaches_the_logits(model):
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURE]):
        plain = model.logits.save()
    with model.trace(prompt, images=[PICTURE]):
        model.vision.image_features[:] = 0
        edited = model.logits.save()
    assert not torch.allclose(plain, edited)


@pytest.fixture(scope="module")
def norm_after(tmp_path_factory):
    path = build(CHECKPOINT, tmp_path_factory.mktemp("molmo2") / "norm_after", text_config={"norm_after": True})
    return StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True)


def test_norm_after_blocks_add_their_normed_sublayers(norm_after):
    rows = []
    with norm_after.trace(chat(norm_after), images=[PICTURE]):
        for block in norm_after.layers:
            rows.append((block.input.save(), block.self_attn.attention_output.save(), block.mlp.mlp_output.save(),
                         block.layer_output.save()))
    for x, attention, mlp, out in rows:
        torch.testing.assert_close(x + attention + mlp, out)
