"""Blocks that carry several streams (`vlreg.core.envoys.streams.StreamsLayer`) and the
``"streams"`` batch layout (`vlreg.core.serving.batching`).

The layout is checked on tensors alone; the block values on the one family served today
whose blocks carry several streams, Gemma 3n (vlreg-gemma, whose tower needs timm): which
stream ``input`` and ``layer_output`` are, edits that reach one stream or all of them,
each invoke's rows of every stream, and a skipped block handing on every stream.
"""

from __future__ import annotations

import pytest
import torch

from vlreg.core.envoys.streams import StreamsLayer
from vlreg.core.serving.batching import Run, select, splice
from vlreg.testing import chat, load


def test_the_streams_layout_cuts_an_invokes_rows_of_every_stream():
    whole = torch.arange(4 * 3 * 2).reshape(4, 3, 2)  # 4 streams of a batch of 3 rows
    run = Run(None, ((0, 1), (1, 2)), rows=3)
    assert torch.equal(select("streams", whole, (1, 2), run), whole[:, 1:3])
    spliced = splice("streams", whole, (1, 2), run, torch.zeros(4, 2, 2, dtype=whole.dtype))
    assert torch.equal(spliced[:, 0], whole[:, 0]) and not spliced[:, 1:].any()
    assert torch.equal(whole, torch.arange(4 * 3 * 2).reshape(4, 3, 2)), "a splice is a copy"


@pytest.fixture(scope="module")
def model():
    """Gemma 3n, where vlreg-gemma is installed (the layout above needs no model)."""
    pytest.importorskip("vlreg_gemma", reason="the blocks of several streams served today are Gemma 3n's: "
                                              "install plugins/gemma")
    pytest.importorskip("timm", reason="Gemma 3n's tower is a timm model: install plugins/gemma's dependencies")
    return load("gemma3n")


def test_input_and_layer_output_are_the_active_stream_of_what_the_block_takes_and_returns(model):
    rows = []
    with model.trace(chat(model, images=0)):
        for block in model.layers:
            rows.append((block.input.save(), block.input_streams.save(), block.layer_output.save(),
                         block.layer_streams.save(), block.output.save()))
    for block, (x, taken, out, returned, output) in zip(model.layers, rows):
        assert isinstance(block, StreamsLayer) and taken.shape[0] == returned.shape[0] == block.num_streams > 1
        assert torch.equal(x, taken[block.active_stream]) and torch.equal(out, returned[block.active_stream])
        assert torch.equal(returned, output)
    for (_, _, _, returned, _), (_, taken, *_) in zip(rows, rows[1:]):
        assert torch.equal(returned, taken)


def test_an_edit_of_the_active_stream_leaves_the_others(model):
    prompt, active = chat(model, images=0), model.layers[0].active_stream
    with model.trace(prompt):
        plain = model.layers[1].input_streams.save()
    with model.trace(prompt):
        model.layers[0].layer_output[:] = 0  # in place
        edited = model.layers[1].input_streams.save()
    with model.trace(prompt):
        model.layers[1].input = torch.ones_like(model.layers[1].input)  # assigned
        assigned = model.layers[1].input_streams.save()
    others = [k for k in range(plain.shape[0]) if k != active]
    assert edited[active].abs().max() == 0 and torch.equal(edited[others], plain[others])
    assert (assigned[active] == 1).all() and torch.equal(assigned[others], plain[others])


def test_each_invoke_gets_its_rows_of_every_stream(model):
    prompts = [chat(model, images=0), chat(model, images=0, text="Say something short, and then something a good deal longer.")]
    alone = []
    for prompt in prompts:
        with model.trace(prompt):
            alone.append((model.layers[1].input_streams.save(), model.layers[1].layer_output.save()))
    together = []
    with model.trace() as tracer:
        for prompt in prompts:
            with tracer.invoke(prompt):
                together.append((model.attention_mask.save(), model.layers[1].input_streams.save(),
                                 model.layers[1].layer_output.save()))
    for (streams, out), (mask, both_streams, both_out) in zip(alone, together):
        assert both_streams.shape[:2] == (streams.shape[0], 1) and both_out.shape[0] == 1
        kept = mask[0].bool()  # the prompt's positions, past the batch's padding
        torch.testing.assert_close(both_streams[:, :, kept], streams, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(both_out[:, kept], out, atol=1e-5, rtol=1e-4)


def test_a_skipped_block_hands_on_every_stream(model):
    from vlreg import analysis

    with model.trace(chat(model, images=0)):
        taken = model.layers[2].input_streams.save()
        analysis.skip_layers(model, 2, 2)
        handed = model.layers[3].input_streams.save()
    assert torch.equal(handed, taken)


def test_every_layout_views_its_streams_as_streams_by_batch():
    """Packed along the hidden axis (Qwen4-Exp) or on an axis of their own (GLM-5-Next's mHC):
    `each_stream` is a view of the same elements as ``[streams, batch, seq, hidden]``, and
    `with_active` replaces one stream in a copy."""
    from types import SimpleNamespace

    stacked = torch.arange(2 * 3 * 4 * 5, dtype=torch.float).reshape(2, 3, 4, 5)  # 2 streams, batch 3, 4 tokens
    laid_out = {"stacked": stacked, "packed": stacked.permute(1, 2, 0, 3).flatten(-2),
                "axis": stacked.permute(1, 2, 0, 3)}
    for layout, streams in laid_out.items():
        block = SimpleNamespace(streams_layout=layout, num_streams=2, active_stream=1)
        block.each_stream = lambda s, block=block: StreamsLayer.each_stream(block, s)
        each = block.each_stream(streams)
        assert torch.equal(each, stacked) and each.data_ptr() == streams.data_ptr(), layout
        replaced = StreamsLayer.with_active(block, streams, torch.zeros(3, 4, 5))
        assert replaced.shape == streams.shape and not block.each_stream(replaced)[1].any()
        assert torch.equal(block.each_stream(replaced)[0], stacked[0]) and streams.any(), layout


def test_a_declared_readout_mounts_no_norm_and_transforms_the_logits_its_way():
    from types import SimpleNamespace

    from vlreg.core.envoys.readout import as_returned
    from vlreg.plugin import UNNORMED, Part, Readout, Wrapper

    part = Part("wrapper", "tiny", config=None, root=None)
    assert "norm" in Wrapper("tiny").answer("rename", part).values()
    assert "norm" not in Wrapper("tiny", readout=UNNORMED).answer("rename", part).values()
    assert "norm" in Wrapper("tiny", readout="the lens is refused").answer("rename", part).values()
    model = SimpleNamespace(family=SimpleNamespace(readout=Readout(after=lambda model, logits: logits / 4)))
    assert torch.equal(as_returned(model, torch.full((2, 3), 8.0)), torch.full((2, 3), 2.0))
