"""InstructBLIP-Video, served by vlreg-blip: a prompt's images are one clip's frames.

What the suite (`test_conformance.TestInstructBlipVideo`, on clips of one frame) cannot say:

* on a clip of 4 frames, the count transformers' processor is written for, vlreg's processor
  encodes as transformers' does, and the trace's logits are transformers' own forward's;
  on any other count transformers' processor writes 4 frames' placeholders, which its own
  forward cannot fill, and vlreg's writes the clip's, which it runs as on any clip;
* each frame is one grid of query tokens, the frames' in order at the mask's positions; a
  pixel lit in one frame moves that frame's tokens and no other frame's;
* several prompts take a list of frames each, every clip as long; a prompt holding a
  placeholder is refused, as on every BLIP.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, InstructBlipVideoProcessor

from vlreg.testing import build, chat
from vlreg.testing.conformance import image, lit


CHECKPOINT = "instructblipvideo"


def clip(frames: int, width: int = 56, height: int = 40) -> list:
    return [image(width, height, seed=seed) for seed in range(frames)]


def test_a_clip_of_four_frames_is_transformers_own(model):
    path = build("instructblipvideo")
    own = InstructBlipVideoProcessor.from_pretrained(path)
    frames = clip(4)
    theirs = own(text=chat(model), images=frames, return_tensors="pt")
    mine = model.processor(text=chat(model), images=frames, return_tensors="pt")
    assert sorted(mine) == sorted(theirs) and all(torch.equal(mine[key], theirs[key]) for key in theirs)
    with model.trace(chat(model), images=frames):
        logits = model.logits.save()
    transformers_model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        expected = transformers_model(**theirs).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def test_other_clips_get_their_own_placeholders(model):
    """transformers' processor writes 4 frames' worth, which its own forward cannot fill from 2
    frames; vlreg's writes 2 frames' worth, and the trace is the forward on that encoding."""
    path = build("instructblipvideo")
    transformers_model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager").eval()
    frames = clip(2)
    theirs = InstructBlipVideoProcessor.from_pretrained(path)(text=chat(model), images=frames, return_tensors="pt")
    with pytest.raises(RuntimeError, match="source < number of ones in mask"):  # 32 placeholders, 16 features
        with torch.no_grad():
            transformers_model(**theirs)
    mine = model.processor(text=chat(model), images=frames, return_tensors="pt")
    queries = model.vision.qformer.num_query_tokens
    assert int((mine["input_ids"] == model.image_token_id).sum()) == 2 * queries
    assert torch.equal(mine["input_ids"][0, 2 * queries:], theirs["input_ids"][0, 4 * queries:])  # the text as theirs
    with model.trace(chat(model), images=frames):
        logits = model.logits.save()
    with torch.no_grad():
        expected = transformers_model(**mine).logits
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)


def test_each_frame_is_a_grid_of_queries_at_the_mask(model):
    frames = clip(3)
    geometry = model.vision.geometry(chat(model), frames)
    with model.trace(chat(model), images=frames):
        mask = model.vision.image_token_mask.save()
    queries = model.vision.qformer.num_query_tokens
    assert [(frame.index, frame.tokens, frame.grids[0].label) for frame in geometry] == [
        (index, queries, "queries") for index in range(3)]
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([frame.positions for frame in geometry]))
    assert geometry[1].grids[0].boxes.tolist() == [[0.0, 0.0, 56.0, 40.0]] * queries


@pytest.mark.parametrize("lit_frame", [0, 2])
def test_a_pixel_lit_in_one_frame_moves_that_frames_tokens_alone(model, lit_frame):
    black = Image.new("RGB", (56, 40), "black")
    geometry = model.vision.geometry(chat(model), [black] * 3)
    features = []
    for frames in ([black] * 3, [lit(56, 40, 20, 13) if index == lit_frame else black for index in range(3)]):
        with model.trace(chat(model), images=frames):
            features.append(model.vision.image_features.save())
    moved = (features[1] - features[0]).abs().sum(-1) > 0
    for frame in geometry:
        assert bool(moved[frame.features].all()) == (frame.index == lit_frame), frame.index
        assert bool(moved[frame.features].any()) == (frame.index == lit_frame), frame.index


def test_several_prompts_take_a_clip_each_every_clip_as_long(model):
    prompts = [chat(model), chat(model, text="Describe the picture.")]
    with model.trace(prompts, images=[clip(2), clip(2, 30, 60)]):
        mask = model.vision.image_token_mask.save()
    assert mask.sum(-1).tolist() == [2 * model.vision.qformer.num_query_tokens] * 2
    with pytest.raises(ValueError, match=r"clips have \[2, 3\] frames"):
        with model.trace(prompts, images=[clip(2), clip(3)]):
            model.logits.save()
    with pytest.raises(ValueError, match="a list of frames per prompt"):
        with model.trace(prompts, images=clip(2)):
            model.logits.save()
    with pytest.raises(ValueError, match="writes each image's placeholders itself"):
        with model.trace("<video>" + chat(model), images=clip(1)):
            model.logits.save()
