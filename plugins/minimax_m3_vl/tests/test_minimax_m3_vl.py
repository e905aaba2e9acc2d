"""MiniMax-M3-VL, served by vlreg-minimax-m3-vl: what the suite (`test_conformance.TestMiniMaxM3VL`)
cannot say.

* each image's geometry counts the image tokens at the mask's positions, its grid the 2 x 2
  blocks of the processor's ``image_grid_thw``;
* the indexer's values are refused by name, saying where to read them natively;
* the attention vlreg serves on an indexed block is the one the selection restricts: a query
  attends to no key outside the blocks its indexer kept;
"""

from __future__ import annotations

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import geometry_beside_grid_thw, image

CHECKPOINT = "minimax_m3_vl"
PICTURES = (image(112, 84), image(56, 112, seed=1))


def test_the_geometry_counts_the_masks_tokens(model):
    for geometry, (frames, rows, columns) in geometry_beside_grid_thw(model, PICTURES):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns, geometry.tokens) == (rows // 2, columns // 2, frames * rows * columns // 4)


def test_the_indexer_is_refused_by_name(model):
    rows = model.support()
    for name in ("indexer_scores", "selected_keys", "sparse_attention_mask"):
        assert "no standard names for a sparse-attention indexer" in rows[f"self_attn.{name}"], name
    with pytest.raises(AttributeError, match="indexer.output"):
        model.layers[1].self_attn.selected_keys


def test_the_attention_reads_only_the_selected_key_blocks(model):
    prompt, pictures = chat(model), [PICTURES[0]]
    block = model._module.config.text_config.index_block_size
    with model.trace(prompt, images=pictures):
        selected = model.layers[1].self_attn.indexer.output.save()
        probabilities = model.layers[1].self_attn.attention_probabilities.save()
    heads, queries = probabilities.shape[1], probabilities.shape[2]
    kept = torch.zeros(1, selected.shape[1], queries, -(-queries // block) + 1, dtype=torch.bool)
    kept.scatter_(-1, selected.masked_fill(selected < 0, kept.shape[-1] - 1), True)
    allowed = kept[..., :-1].repeat_interleave(block, -1)[..., :queries]
    allowed = allowed.repeat_interleave(heads // selected.shape[1], 1)
    assert (probabilities[~allowed] == 0).all()
    assert (probabilities[allowed & torch.ones_like(allowed).tril()] > 0).all()
    assert (~allowed & torch.ones_like(allowed).tril()).any()  # the selection drops some earlier keys
