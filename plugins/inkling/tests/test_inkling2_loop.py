"""Inkling 2 Loop (transformers 5.25) against the conformance suite, and what it cannot say:

* ``layers`` is the blocks' calls in forward order: a looped block once per pass, each
  entry that pass's values (`vlreg.core.envoys.blocks`), as transformers' ``hidden_states``;
* a later pass restarts from the stream the blocks before the loop left;
* an edit of one pass's stream reaches the next pass and the logits, the other passes' kept.
"""

import pytest
import torch

pytest.importorskip("transformers.models.inkling2_loop",
                    reason="inkling2_loop: not in this transformers release (5.24 adds it)")

from vlreg.testing import chat  # noqa: E402
from vlreg.testing.conformance import image  # noqa: E402

from .test_conformance import Inkling2Suite  # noqa: E402

CHECKPOINT = "inkling2_loop"
PICTURE = image(24, 16)


class TestInkling2Loop(Inkling2Suite):
    checkpoint = CHECKPOINT
    o_proj = "o_proj.linear"


def _streams(model, prompt):
    """Each block call's input and output in one run, and transformers' own output."""
    entering, leaving = [], []
    with model.trace(prompt, images=[PICTURE]):
        for block in model.layers:
            entering.append(block.input.save())
            leaving.append(block.layer_output.save())
        logits = model.logits.save()
    return entering, leaving, logits


def test_layers_are_the_block_calls_in_forward_order(model):
    config = model._module.config.text_config
    assert model.num_layers == config.total_num_hidden_layers == 3
    assert [(block.module_index, block.pass_index) for block in model.layers] == [(0, 0), (1, 0), (1, 1)]
    prompt = chat(model)
    entering, leaving, _ = _streams(model, prompt)
    encoding = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")
    calls = []
    hook = model._module.model.language_model.layers[1].register_forward_hook(lambda m, i, o: calls.append(o))
    try:
        with torch.no_grad():
            hidden = model._module(**encoding, output_hidden_states=True).hidden_states
    finally:
        hook.remove()
    assert len(calls) == 2 and not torch.equal(calls[0], calls[1])
    for index, call in enumerate(calls, start=1):
        torch.testing.assert_close(leaving[index], call)
    for index in range(2):  # transformers' hidden_states count the calls too (the last is normed)
        torch.testing.assert_close(entering[index], hidden[index])
    # the second pass restarts from the stream the block before the loop left
    torch.testing.assert_close(entering[2], leaving[0])


def test_an_edit_of_the_first_pass_reaches_the_second_and_the_logits(model):
    prompt = chat(model)
    _, before, logits = _streams(model, prompt)
    with model.trace(prompt, images=[PICTURE]):
        first = model.layers[0].layer_output.save()
        model.layers[1].layer_output[:] = 0
        edited = model.layers[2].layer_output.save()
        moved = model.logits.save()
    torch.testing.assert_close(first, before[0])
    assert not torch.allclose(edited, before[2]) and not torch.allclose(moved, logits)
