"""vlreg.analysis.videos: attention to each frame, occlusion per frame and per video token, a
frame patched from another video, and the logit lens at a video's tokens
(`logit_lens(..., videos=...)`), checked against the trace they summarize, on the tiny Qwen2-VL
(2 frames a temporal patch)."""

import pytest
import torch

from vlreg import Unavailable
from vlreg.analysis import logit_lens, project_on_vocab
from vlreg.analysis.videos import attention_to_frames, occlude_frames, occlude_video_tokens, patch_frame
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image

VIDEO = [image(56, 56, seed=index) for index in range(4)]
OTHER = [image(56, 56, seed=20 + index) for index in range(4)]


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


def test_the_logit_lens_reads_each_video_token_out_after_the_images(model):
    """With an image and a video, the lens gives the image's tokens, then the video's: each
    video token's readout is the block's stream at its position read out, and the geometry
    says the frames it covers."""
    picture, prompt = image(56, 56, seed=9), chat(model, "image", "video")
    lens = logit_lens(model, prompt, [picture], videos=[VIDEO], layers=[1], top=3, target=5)
    image_geometry, video_geometry = lens.geometry
    assert [piece.shape[1] for piece in lens.top_ids] == [image_geometry.tokens, video_geometry.tokens]
    assert video_geometry.frames[0].tolist() == [0, 1] and video_geometry.frames[-1].tolist() == [2, 3]
    with model.trace(prompt, images=[picture], videos=[VIDEO]):
        stream = model.layers[1].layer_output[0, video_geometry.positions].save()
    expected = project_on_vocab(model, stream).float().softmax(-1)
    torch.testing.assert_close(lens.target_probabilities[1][0], expected[:, 5])
    assert torch.equal(lens.top_ids[1][0], expected.topk(3, dim=-1).indices)
    alone = logit_lens(model, chat(model, "video"), videos=[VIDEO], layers=[1], top=3)
    assert len(alone.geometry) == 1 and alone.top_ids[0].shape[1] == video_geometry.tokens
    with pytest.raises(ValueError, match="videos="):
        logit_lens(model, chat(model, "video"))


def test_occluding_a_video_token_is_the_logit_drop_with_its_features_replaced(model):
    prompt = chat(model, "video")
    found = occlude_video_tokens(model, prompt, VIDEO, target=5, batch=5)  # two chunks: they join in order
    assert found.scores.shape == (8,) and found.frames[::4].tolist() == [[0, 1], [2, 3]] and found.target == 5
    token = 6
    with model.trace(prompt, videos=[VIDEO]):
        clean = model.logits[0, -1, 5].save()
    with model.trace(prompt, videos=[VIDEO]):
        features = model.vision.video_features
        features[token] = features.mean(0)
        edited = model.logits[0, -1, 5].save()
    torch.testing.assert_close(found.scores[token], (clean - edited).float(), rtol=1e-4, atol=1e-5)


def test_patching_a_frame_takes_each_blocks_output_at_its_tokens_from_the_other_video(model):
    prompt = chat(model, "video")
    found = patch_frame(model, prompt, VIDEO, OTHER, grid=1, target=5)
    assert found.layers == (0, 1) and found.effects.shape == (2,) and found.frames == (2, 3)
    positions = found.geometry.positions[4:]
    with model.trace(prompt, videos=[OTHER]):
        source = model.layers[1].layer_output[0, positions].save()
    with model.trace(prompt, videos=[VIDEO]):
        clean = model.logits[0, -1, 5].save()
    with model.trace(prompt, videos=[VIDEO]):
        model.layers[1].layer_output[0, positions] = source
        patched = model.logits[0, -1, 5].save()
    torch.testing.assert_close(found.effects[1], (patched - clean).float())
    assert found.clean == pytest.approx(float(clean)) and bool(found.effects.abs().sum() > 0)


def test_patching_a_frame_from_a_video_of_other_grids_is_refused(model):
    with pytest.raises(ValueError, match="same size"):
        patch_frame(model, chat(model, "video"), VIDEO, [image(84, 56, seed=index) for index in range(4)])
