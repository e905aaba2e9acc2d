"""The tower runs once for many traces of the same images (`Vision.cache`)."""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINTS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava_interleave", "llava_1_5", "llava_next", "mistral3", "llama4",
            "nemotron_h_omni")


PICTURES = [image(112, 84)]


def tower_runs(model):
    """Counts the tower's runs: its first block computes only when the tower does (a
    replayed tower is still called, its forward skipped)."""
    calls = []
    handle = model.vision.layers[0]._module.register_forward_hook(lambda *args: calls.append(1))
    return calls, handle


def test_a_replayed_tower_gives_the_same_features_and_logits_for_copies(model):
    prompt, copies = chat(model), 3
    cache = model.vision.cache(prompt, PICTURES)
    calls, handle = tower_runs(model)
    try:
        with torch.no_grad(), model.trace([prompt] * copies, images=[list(PICTURES)] * copies):
            cache.replay(copies=copies)
            replayed = model.vision.image_features.save()
            logits = model.logits.save()
    finally:
        handle.remove()
    assert calls == []  # the tower did not run
    with torch.no_grad(), model.trace([prompt] * copies, images=[list(PICTURES)] * copies):
        features = model.vision.image_features.save()
        expected = model.logits.save()
    torch.testing.assert_close(replayed, features)
    torch.testing.assert_close(logits, expected)


def test_tower_values_are_refused_and_other_images_do_not_replay(model):
    prompt = chat(model)
    cache = model.vision.cache(prompt, PICTURES)
    with pytest.raises(Unavailable, match="replays the tower's cached output"):
        with torch.no_grad(), model.trace(prompt, images=PICTURES):
            cache.replay()
            model.vision.tower_output.save()
    with pytest.raises(ValueError, match="not 2 copies of the cached images"):
        with torch.no_grad(), model.trace(prompt, images=PICTURES):
            cache.replay(copies=2)


def test_an_occlusion_sweep_runs_the_tower_once(model):
    calls, handle = tower_runs(model)
    try:
        found = analysis.occlusion(model, chat(model), PICTURES, batch=4)
    finally:
        handle.remove()
    assert len(calls) == 1 and found.scores.shape == (found.geometry[0].tokens,)


def test_every_replay_is_handed_the_towers_output_afresh():
    """A wrapper may edit what the tower returns in place (Gemma 3n scales its grid by
    sqrt(hidden_size)): the cache hands each replay new tensors, so the next replay gets what
    the tower returned, with one copy of the images or several (Gemma 3n end to end:
    plugins/gemma/tests/test_gemma3n.py)."""
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    from vlreg.core.reuse import _repeat

    returned = torch.arange(6.0).reshape(1, 2, 3)
    cached = BaseModelOutputWithPooling(last_hidden_state=returned.clone())
    for copies in (1, 2, 1):
        handed = _repeat(cached, copies)
        assert handed is not cached and handed.last_hidden_state.shape[0] == copies
        handed.last_hidden_state *= 8  # the wrapper's in-place edit
    assert torch.equal(cached.last_hidden_state, returned)
