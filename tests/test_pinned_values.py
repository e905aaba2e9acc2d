"""A value pinned to one call of an operation its block's parent runs in a loop
(`At(..., inside=..., occurrence=...)`), declared by a throwaway plugin over Qwen2-VL."""

import pytest
import torch

from vlreg_qwen2_vl import plugin as qwen2_vl
from vlreg import OutOfOrder, hookimpl
from vlreg.plugin import Layer
from vlreg.testing import Forwarding, build, chat, load, registered
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def path():
    return str(build("qwen2_vl"))


def prompt(model):
    return chat(model)


def test_a_value_pinned_to_its_blocks_call_in_a_parents_forward(path):
    """`value(At(..., inside=..., occurrence=...))`: the text model calls its blocks from one call
    site in a loop, so block k's call is occurrence k of one operation in the text model's
    forward, which is instrumented at build. Read there, it is each block's input."""
    from vlreg.plugin import At, argument

    def text_model(layer):
        return layer.parent.parent

    class CalledLayer(Layer):
        called_with = argument(
            0, At(lambda layer: f"{text_model(layer).path}.source.decoder_layer_0.input",
                  inside=text_model, occurrence=lambda layer: layer.block_index),
            description="what the loop passes the block",
        )

    class Pinned(Forwarding):
        def __init__(self):
            super().__init__(qwen2_vl)

        @hookimpl
        def vlreg_envoys(self, part):
            envoys = dict(qwen2_vl.vlreg_envoys(part) or {})
            return {cls: (CalledLayer if base is Layer else base) for cls, base in envoys.items()}

    with registered(Pinned(), name="pinned", replacing=[qwen2_vl]):
        model = load(path)
        passed, entered = [], []
        with model.trace(prompt(model), images=[image(56, 56)]):
            for block in model.layers:  # the call's arguments, then what the block receives
                passed.append(block.called_with.save())
                entered.append(block.input.save())
        assert all(torch.equal(a, b) for a, b in zip(passed, entered))
        with model.trace(prompt(model), images=[image(56, 56)]):
            model.layers[1].called_with = torch.zeros_like(model.layers[1].called_with)
            zeroed = model.layers[1].input.save()
        assert zeroed.abs().max() == 0
        with pytest.raises(OutOfOrder, match=r"layers\[0\].called_with was read after layers\[1\].called_with"):
            with model.trace(prompt(model), images=[image(56, 56)]):
                model.layers[1].called_with.save()
                model.layers[0].called_with.save()
