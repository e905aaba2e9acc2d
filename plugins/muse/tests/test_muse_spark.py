"""What Muse Spark adds over Glimmer: residual gates that weigh the stream and each sublayer's
output per channel, experts in a narrower space than the stream, and an audio tower vlreg
does not serve."""

import numpy
import pytest
import torch

from vlreg.testing import chat, load
from vlreg.testing.conformance import image


@pytest.fixture(scope="module")
def model():
    return load("muse_spark")


def test_the_plain_sum_does_not_hold_and_the_gated_one_does(model):
    """``input + attention_output + mlp_output`` is not the block's output; the residual gates'
    weighted sums are (``GatedResidualLayer.identity``)."""
    block, values = model.layers[0], {}  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model), images=[image(112, 84)]):
        values.update({"input": block.input.save(), "self_attn.attention_output": block.self_attn.attention_output.save(),
                       "mlp.mlp_output": block.mlp.mlp_output.save(), "layer_output": block.layer_output.save()})
    plain = values["input"] + values["self_attn.attention_output"] + values["mlp.mlp_output"]
    assert not torch.allclose(plain, values["layer_output"])
    torch.testing.assert_close(block.identity(values), values["layer_output"])


def test_the_experts_run_in_the_narrower_space_between_the_projections(model):
    mlp = model.layers[1].mlp
    assert (mlp.expert_hidden_size, model.hidden_size) == (32, 64)
    found = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(chat(model), images=[image(112, 84)]):
        found += [mlp.routed_output.save(), mlp.post_expert_proj.output.save(), mlp.mlp_output.save()]
    routed, projected, added = found
    assert routed.shape[-1] == 32 and projected.shape[-1] == 64
    torch.testing.assert_close(model.layers[1].post_feedforward_layernorm._module(projected).view(added.shape), added)


def test_audio_given_to_a_trace_is_refused_before_the_model_runs(model):
    assert "audio tower" in model.support()["audio"] and model.family.unserved == {"audio_config": "muse_spark_audio"}
    with pytest.raises(TypeError, match="'audio' given to the trace"):
        with model.trace(chat(model, images=0), audio=[numpy.ones(64, numpy.float32)]):
            model.logits.save()
