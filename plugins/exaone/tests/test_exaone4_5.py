"""EXAONE 4.5, served by vlreg-exaone: what the suite (`test_conformance.TestExaone4_5`) cannot say.

* each image's geometry counts the image tokens at the mask's positions, its grid the merge
  blocks the processor's ``image_grid_thw`` gives;
* the text blocks add each sublayer's normed output: ``attention_output`` is
  ``post_attention_layernorm`` of the attention's own output;
* the tower is grouped-query: each window's pattern, from the queries and the keys repeated
  over their groups, times that window's values is its head outputs.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "exaone4_5"
PICTURES = (image(112, 168), image(84, 56, seed=1))






def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_what_the_attention_adds_is_its_normed_output(model):
    block = model.layers[0]
    with model.trace(chat(model), images=[PICTURES[0]]):
        raw = block.self_attn.output[0].save()
        added = block.self_attn.attention_output.save()
    torch.testing.assert_close(added, block.post_attention_layernorm._module(raw), rtol=0, atol=0)


def test_each_windows_pattern_gives_its_head_outputs(model):
    attention = model.vision.layers[0].self_attn  # a windowed block
    with model.trace(chat(model), images=[PICTURES[0]]):
        bounds = attention.inputs[1]["cu_seqlens"].save()
        queries, keys = attention.attention_queries.save(), attention.attention_keys.save()
        values, heads = attention.attention_values.save(), attention.attention_head_outputs.save()
    assert keys.shape[1] * 2 == queries.shape[1] == model.vision.num_heads  # 2 key heads for 4 query heads
    values = values.repeat_interleave(2, dim=1)
    patterns = attention.patterns(queries, keys, bounds)
    assert len(patterns) == 6  # 112 x 168 pixels: six 56-pixel windows
    for pattern, (start, end) in zip(patterns, zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        torch.testing.assert_close((pattern @ values[0, :, start:end]).transpose(0, 1), heads[0, start:end])
