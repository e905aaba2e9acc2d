"""What Mistral Large 4 promises beyond the conformance suites: its DSA indexer refused by
name, keys and values one block builds and a later one reuses, the indexer's selection
applied to the attention, and skipping only with the blocks that reuse what a block
computes."""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis import skip_layers
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "mistral_large4"


def test_the_indexer_and_reused_latents_are_refused_by_name(model):
    rows = model.support()
    for name in ("indexer_scores", "selected_keys", "sparse_attention_mask"):
        assert "not declared on the standard sparse-attention names" in rows[f"self_attn.{name}"], name
    assert "reuses block 0's" in rows["layers.1.self_attn.kv_latents"]
    assert "q_lora_rank is None" in rows["self_attn.query_latents"]
    with pytest.raises(AttributeError, match="indexer.output"):
        model.layers[0].self_attn.selected_keys


def test_a_write_to_a_shared_latent_reaches_the_blocks_that_reuse_it(model):
    """Block 1 expands block 0's key-value latent: zeroing it there zeroes block 1's values
    (no bias: a zero latent expands to zero), which block 1 builds from nothing of its own."""
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        plain = model.layers[1].self_attn.attention_values.save()
    with model.trace(prompt, images=pictures):
        model.layers[0].self_attn.kv_latents[:] = 0
        zeroed = model.layers[1].self_attn.attention_values.save()
    assert plain.abs().sum() > 0
    torch.testing.assert_close(zeroed, torch.zeros_like(zeroed))


def test_the_indexer_restricts_each_query_to_its_selection(model):
    """Past ``index_topk`` keys, a query attends to exactly that many: the attention values
    vlreg serves are computed with the selection applied."""
    prompt, pictures = chat(model), [image(112, 84)]
    topk = model._module.config.text_config.index_topk
    with model.trace(prompt, images=pictures):
        probabilities = model.layers[0].self_attn.attention_probabilities.save()
    kept = (probabilities[0] > 0).sum(-1)
    assert kept.shape[-1] > topk and (kept[:, topk:] == topk).all()


def test_a_block_whose_latent_or_selection_is_reused_is_skipped_only_with_its_readers(model):
    with pytest.raises(Unavailable, match=r"layers \[1\] reuse its key-value latent"):
        skip_layers(model, 0, 0)
    assert model.layers[0].why_not_skipped(range(0, 2)) is None
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        entering = model.layers[1].input.save()
    with model.trace(prompt, images=pictures):
        skip_layers(model, 1, 1)  # block 1 hands on the stream and block 0's selection it was given
        leaving = model.layers[2].input.save()
    torch.testing.assert_close(entering, leaving)
