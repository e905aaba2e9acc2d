"""Cosmos3 Edge, served by vlreg-cosmos3-edge: what the suite (`test_conformance.TestCosmos3Edge`)
cannot say.

* each image's geometry counts the image tokens at the mask's positions, its grid the merge
  blocks of the processor's ``image_grid_thw``;
* an edit of the learned positions reaches the logits (the grid is the tower's, per image);
* each image's pattern, from the queries and keys, times its values is its head outputs.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "cosmos3_edge"
PICTURES = (image(112, 84), image(64, 96, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_an_edit_of_the_positions_reaches_the_logits(model):
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURES[0]]):
        plain = model.logits.save()
    with model.trace(prompt, images=[PICTURES[0]]):
        model.vision.position_embeddings[:] = 0
        edited = model.logits.save()
    assert not torch.allclose(plain, edited)


def test_each_images_pattern_gives_its_head_outputs(model):
    attention = model.vision.layers[0].self_attn
    with model.trace(chat(model, images=2), images=list(PICTURES)):
        bounds = attention.inputs[1]["cu_seqlens"].save()
        queries, keys = attention.attention_queries.save(), attention.attention_keys.save()
        values, heads = attention.attention_values.save(), attention.attention_head_outputs.save()
    patterns = attention.patterns(queries, keys, bounds)
    assert len(patterns) == 2
    for pattern, (start, end) in zip(patterns, zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        torch.testing.assert_close((pattern @ values[0, :, start:end]).transpose(0, 1), heads[0, start:end])
