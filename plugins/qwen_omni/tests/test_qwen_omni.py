"""What the omni thinkers add over a Qwen VL line: the audio's features enter the
embeddings before the image's, audio given to a trace is refused, and Qwen3-Omni's
learned tower positions and DeepStack additions are refused by name, with where to read
them."""

from __future__ import annotations

import numpy
import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat, load
from vlreg.testing.conformance import image

CHECKPOINTS = ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker")

PICTURES = [image(112, 84)]


def test_the_image_is_written_after_the_audio(model):
    """On a prompt with audio (the processor's encoding: a trace hands it no audio), the
    image's features are still what block 0 receives at the image tokens, and an edit of
    them leaves the audio's rows alone."""
    prompt = chat(model, {"type": "audio"}, {"type": "image"})
    encoding = dict(model.processor(text=prompt, images=PICTURES, audio=[numpy.ones(16000, numpy.float32)],
                                    return_tensors="pt"))
    audio = encoding["input_ids"] == model._module.config.audio_token_id
    assert "input_features" in encoding and audio.sum() > 0
    with model.trace(encoding):
        mask = model.vision.image_token_mask.save()
        embeddings = model.token_embeddings.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert torch.equal(first[mask], features) and not (mask & audio).any()
    assert not torch.equal(first[audio], embeddings[audio])  # the audio's features are there
    with model.trace(encoding):
        model.vision.image_features[:] = 0
        ablated = model.layers[0].input.save()
    assert ablated[mask].abs().max() == 0 and torch.equal(ablated[audio], first[audio])


def test_audio_given_to_a_trace_is_refused_before_the_model_runs(model):
    with pytest.raises(TypeError, match="'audio' given to the trace"):
        with model.trace(chat(model, {"type": "audio"}), audio=[numpy.ones(16000, numpy.float32)]):
            model.logits.save()


def test_qwen3_omni_refuses_positions_and_deepstack_saying_where_they_are():
    omni = load("qwen3_omni_moe_thinker")
    prompt = chat(omni, {"type": "image"})
    rows = omni.support()
    for row in ("vision.position_embeddings", "vision.deepstack_features", "layers.0.deepstack_output"):
        assert "not served on this family yet" in rows[row], row
    with pytest.raises(Unavailable, match="layers\\[1\\].input minus this block's layer_output"):
        with omni.trace(prompt, images=PICTURES):
            omni.layers[0].deepstack_output.save()
    with omni.trace(prompt, images=PICTURES):
        mask = omni.vision.image_token_mask.save()
        patches = omni.vision.patch_embeddings.save()
        first_tower = omni.vision.layers[0].input.save()
        taps = omni.vision.output.deepstack_features.save()
        out = omni.layers[0].layer_output.save()
        after = omni.layers[1].input.save()
    assert (first_tower - patches[0]).abs().max() > 0  # the learned positions
    torch.testing.assert_close((after - out)[mask], taps[0])
    assert torch.equal(after[~mask], out[~mask])
