"""GLM-5-Next's own values beyond the suite: the DSA indexer's selection is what the
attention reads, on the block that runs it and on the "shared" block after it, a write to it
reaches both, and a block whose selection is reused cannot be skipped alone."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis import skip_layers
from vlreg.testing import chat, load
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def model():
    return load("glm5_next")


def _read(pattern, selection):
    """Which keys each query's selection names, as ``[batch, 1, queries, keys]`` booleans."""
    keys = torch.zeros(*selection.shape[:2], pattern.shape[-1] + 1, dtype=torch.bool)
    keys.scatter_(-1, selection.long().clamp(min=-1) % (pattern.shape[-1] + 1), True)
    return keys[..., :-1].unsqueeze(1)  # -1 (no key) lands in the dropped last column


def test_the_selection_is_what_both_blocks_attend_to(model):
    with model.trace(chat(model, images=1), images=[image(112, 84)]):
        scores = model.layers[1].self_attn.indexer_scores.save()
        selected = model.layers[1].self_attn.selected_keys.save()
        first = model.layers[1].self_attn.attention_probabilities.save()
        reused = model.layers[2].self_attn.selected_keys.save()
        mask = model.layers[2].self_attn.sparse_attention_mask.save()
        second = model.layers[2].self_attn.attention_probabilities.save()
    assert scores.shape[:2] == selected.shape[:2] and torch.equal(selected, reused)
    read = _read(first, selected)
    assert not read.all() and (first[~read.expand_as(first)] == 0).all()
    assert (second[~read.expand_as(second)] == 0).all()
    assert torch.equal(mask == 0, read)  # eager: additive, 0 where a key is read


def test_a_write_to_the_selection_reaches_the_block_and_the_one_reusing_it(model):
    prompt, pictures = chat(model, images=1), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        selected = model.layers[1].self_attn.selected_keys
        selected[...] = -1
        selected[..., 0] = 0  # every query may read the first key only
        first = model.layers[1].self_attn.attention_probabilities.save()
        second = model.layers[2].self_attn.attention_probabilities.save()
    for pattern in (first, second):
        assert torch.allclose(pattern[..., 0], torch.ones(())) and not pattern[..., 1:].any()


def test_a_block_whose_selection_is_reused_is_not_skipped_alone(model):
    with pytest.raises(Unavailable, match=r"layers \[2\] reuse its indexer's selection"):
        with model.trace(chat(model, images=0)):
            skip_layers(model, 1, 1)
    with model.trace(chat(model, images=0)):
        skip_layers(model, 1, 2)
        logits = model.logits.save()
    assert torch.isfinite(logits).all()
