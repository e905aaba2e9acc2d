"""Qwen4-Exp's own values beyond the suite: its n-gram embeddings read at the ids the table is
indexed by, and its indexer's selection, which the attention applies (a write reaches it)."""

import pytest
import torch

from vlreg.testing import chat, load
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def model():
    return load("qwen4_exp")


def test_the_n_gram_embeddings_are_the_table_at_the_hashed_ids(model):
    with model.trace(chat(model, images=0)):
        ids = model.layers[0].per_layer_ids.save()
        looked_up = model.layers[0].per_layer_embeddings.save()
        added = model.layers[0].per_layer_output.save()
    table = model.layers[0].ple.ple_embedding.ngram_embedding.weight
    assert ids.dtype == torch.long and torch.equal(table[ids].flatten(-2), looked_up)
    assert added.shape[-1] == model.layers[0].num_streams * model.hidden_size


def test_the_indexers_selection_is_what_the_attention_reads(model):
    prompt = chat(model, images=1)
    pictures = [image(112, 84)]
    with model.trace(prompt, images=pictures):
        selected = model.layers[1].self_attn.selected_token_mask.save()
        pattern = model.layers[1].self_attn.attention_probabilities.save()
    assert selected.dtype == torch.bool and (pattern[~selected.expand_as(pattern)] == 0).all()
    with model.trace(prompt, images=pictures):
        kept = model.layers[1].self_attn.selected_token_mask
        kept[...] = False
        kept[..., 0] = True  # every query may read the first key only
        narrowed = model.layers[1].self_attn.attention_probabilities.save()
    assert torch.allclose(narrowed[..., 0], torch.ones(())) and not narrowed[..., 1:].any()
