"""VideoLLaMA 3, served by vlreg-video-llama-3: what the suite (`test_conformance.TestVideoLlama3`)
cannot say.

* each image's geometry counts the image tokens at the mask's positions: a token a patch of
  the processor's ``image_grid_thw``;
* each image's pattern, from the queries and keys, times its values is its head outputs;
* block 0 receives the patch embeddings as they are (the tower adds no positions).
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "video_llama_3"
PICTURES = (image(112, 84), image(56, 98, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows, columns, frames * rows * columns)


def test_each_images_pattern_gives_its_head_outputs(model):
    attention = model.vision.layers[0].self_attn
    with model.trace(chat(model, images=2), images=list(PICTURES)):
        patches = model.vision.patch_embeddings.save()
        first = model.vision.layers[0].input.save()
        bounds = attention.inputs[1]["cu_seqlens"].save()
        queries, keys = attention.attention_queries.save(), attention.attention_keys.save()
        values, heads = attention.attention_values.save(), attention.attention_head_outputs.save()
    torch.testing.assert_close(first.reshape(patches.shape), patches, rtol=0, atol=0)
    patterns = attention.patterns(queries, keys, bounds)
    assert len(patterns) == 2
    for pattern, (start, end) in zip(patterns, zip(bounds[:-1].tolist(), bounds[1:].tolist())):
        torch.testing.assert_close((pattern @ values[0, :, start:end]).transpose(0, 1), heads[0, start:end])
