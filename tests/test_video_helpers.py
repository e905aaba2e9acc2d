"""vlreg.analysis.videos: attention to each frame and occlusion per frame, checked against
the trace they summarize, on the tiny Qwen2-VL (2 frames a temporal patch)."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis.videos import attention_to_frames, occlude_frames
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image

VIDEO = [image(56, 56, seed=index) for index in range(4)]


@pytest.fixture(scope="module")
def model():
    return load(str(build("qwen2_vl")))


def test_attention_to_each_frame_is_the_patterns_mass_at_its_tokens(model):
    prompt = chat(model, "video")
    found = attention_to_frames(model, prompt, VIDEO)
    geometry = found.geometry
    assert found.frames.tolist() == [[0, 1], [2, 3]] and found.scores.shape == (model.num_layers, 2)
    with model.trace(prompt, videos=[VIDEO]):
        pattern = model.layers[1].self_attn.attention_probabilities[0, :, -1].save()
    per_token = pattern.mean(0)[geometry.positions]
    half = geometry.tokens // 2
    torch.testing.assert_close(found.scores[1], torch.stack([per_token[:half].sum(), per_token[half:].sum()]))


def test_occluding_a_frame_is_the_logit_drop_with_its_features_zeroed(model):
    prompt = chat(model, "video")
    found = occlude_frames(model, prompt, VIDEO, target=5)
    assert found.scores.shape == (2,)
    with model.trace(prompt, videos=[VIDEO]):
        clean = model.logits[0, -1, 5].save()
    with model.trace(prompt, videos=[VIDEO]):
        model.vision.video_features[found.geometry.tokens // 2:] = 0
        edited = model.logits[0, -1, 5].save()
    torch.testing.assert_close(found.scores[1], (clean - edited).float())


def test_a_prompt_without_the_videos_placeholder_is_refused_by_the_geometry(model):
    with pytest.raises((Unavailable, ValueError)):
        occlude_frames(model, chat(model), VIDEO)
