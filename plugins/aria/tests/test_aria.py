"""What Aria adds: a projector that reads the tower's last block before its final norm,
and blocks whose MLP adds routed experts and shared experts."""

from __future__ import annotations

import pytest
import torch

from vlreg import ReadOnly
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "aria"

PICTURE = image(112, 84)


def test_the_queries_read_the_last_blocks_stream_not_the_towers_output(model):
    """The projector cross-attends ``hidden_states[-1]``, the last block's stream before
    ``post_layernorm``: a write there moves the features, and ``vision.tower_output`` refuses
    a write, naming the block to edit."""
    prompt = chat(model)
    last = model.vision.num_layers - 1
    with model.trace(prompt, images=[PICTURE]):
        plain = model.vision.image_features.save()
    with model.trace(prompt, images=[PICTURE]):
        model.vision.layers[last].layer_output[:] = 0
        edited = model.vision.image_features.save()
    assert not torch.equal(plain, edited)
    with pytest.raises(ReadOnly, match=rf"vision.layers\[{last}\].layer_output"):
        with model.trace(prompt, images=[PICTURE]):
            model.vision.tower_output[:] = 0
            model.logits.save()


def test_an_mlp_adds_its_routed_and_its_shared_experts(model):
    """``mlp_output`` is the routed experts' output plus the shared experts', token by token."""
    rows = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model), images=[PICTURE]):
        for block in model.layers:
            mlp = block.mlp
            rows.append((mlp.routed_output.save(), mlp.shared_expert_output.save(), mlp.mlp_output.save()))
    for routed, shared, out in rows:
        assert routed.shape == shared.shape == (out.shape[0] * out.shape[1], model.hidden_size)
        torch.testing.assert_close(routed + shared, out.reshape(-1, model.hidden_size))
