"""What Idefics2 adds: image tokens that are a perceiver's latents, frames padded to a
batch's largest, and the helpers that map tokens onto patches or pixels refusing them.

The tiny checkpoint cuts each image into 4 crops and the whole image, every frame
resampled to 4 latents: 112 x 84 is 5 frames, 20 image tokens, and each crop (56 x 42) is
padded to the whole image's frame (64 x 48)."""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.collect.sites import resolve
from vlreg.dictionaries import Dictionary, feature_maps
from vlreg.pictures import overlay
from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "idefics2"

PICTURE = image(112, 84)


def patch_mask(model, prompt, images) -> torch.Tensor:
    """``[frames, patches]``, True at the patches wholly over a frame's own pixels, as
    the model's forward finds them from the processor's pixel mask."""
    pixels = model.processor(text=prompt, images=images, return_tensors="pt")["pixel_attention_mask"][0]
    side = model.vision.patch_size
    blocks = pixels.unfold(1, side, side).unfold(2, side, side)
    return (blocks.sum((-1, -2)) == side * side).reshape(pixels.shape[0], -1)


def test_the_features_are_each_frames_latents_in_order(model):
    """`vision.image_features` is the perceiver's output, frame by frame, latent by latent:
    ``resampler_n_latents`` rows a frame, whatever the frame's size."""
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    with model.trace(prompt, images=[PICTURE]):
        tower = model.vision.tower_output.save()
        latents = model.projector.perceiver_resampler.output.save()
        features = model.vision.image_features.save()
    frames = len(geometry.grids)
    assert tower.shape[0] == latents.shape[0] == frames == 5
    assert latents.shape[1] == model._module.config.perceiver_config.resampler_n_latents == geometry.grids[0].tokens
    for frame in range(frames):
        assert torch.equal(features[geometry.span(frame)], latents[frame])


def test_a_write_to_a_frames_padding_reaches_no_latent(model):
    """The crops are padded to the whole image's frame, and the tower's values hold that
    padding; the perceiver reads only a frame's own patches: a write to the tower's output
    at a crop's padding leaves every feature as it was, and one at a patch of its own
    changes that frame's latents only."""
    prompt = chat(model)
    own = patch_mask(model, prompt, [PICTURE])
    assert (~own[0]).any() and own[-1].all(), "a crop holds padding, the whole image none"
    with model.trace(prompt, images=[PICTURE]):
        plain = model.vision.image_features.save()
    with model.trace(prompt, images=[PICTURE]):
        model.vision.tower_output[0, ~own[0]] = 100.0
        padded = model.vision.image_features.save()
    with model.trace(prompt, images=[PICTURE]):
        model.vision.tower_output[0, own[0].nonzero()[0, 0]] = 100.0
        real = model.vision.image_features.save()
    latents = model._module.config.perceiver_config.resampler_n_latents
    assert torch.equal(padded, plain)
    assert not torch.equal(real[:latents], plain[:latents]) and torch.equal(real[latents:], plain[latents:])


def test_do_image_splitting_given_to_a_trace_makes_one_frame_and_its_tokens(model):
    """Idefics2's processor writes an image's tokens from its image processor's own
    ``do_image_splitting``, not from the call's: the trace runs the processor holding the
    option, so the prompt gets one frame's latents for the one frame the tower runs on,
    as `vision.geometry` says."""
    prompt = chat(model)
    with model.trace(prompt, images=[PICTURE], do_image_splitting=False):
        mask = model.vision.image_token_mask.save()
        tower = model.vision.tower_output.save()
        features = model.vision.image_features.save()
    (geometry,) = model.vision.geometry(prompt, [PICTURE], do_image_splitting=False)
    assert tower.shape[0] == 1 and len(geometry.grids) == 1 and geometry.grids[0].label == "global"
    assert int(mask.sum()) == features.shape[0] == geometry.tokens == 4
    assert model.processor.image_processor.do_image_splitting, "the loaded processor is left as it was"


def test_helpers_over_tokens_run_and_those_over_patches_or_pixels_refuse(model, tmp_path):
    """Occlusion and the lens score each latent; a picture of one frame's latents, a
    dictionary's map of the tower's patches onto tokens and a collection of the tower's
    padded rows are refused, each saying why."""
    prompt = chat(model)
    found = analysis.occlusion(model, prompt, [PICTURE], batch=10)
    assert found.scores.shape == (20,) and found.scores.abs().max() > 0
    with pytest.raises(ValueError, match="resampler's 4 latents"):
        overlay(PICTURE, found.geometry[0], found.scores, grid=0)
    tensors = {"W_enc": torch.randn(model.vision.vision_hidden_size, 8), "b_enc": torch.zeros(8),
               "W_dec": torch.randn(8, model.vision.vision_hidden_size), "b_dec": torch.zeros(model.vision.vision_hidden_size)}
    dictionary = Dictionary.from_tensors(tensors).attach(model, "vision.layers[0].layer_output")
    with pytest.raises(Unavailable, match="resampler.s latents"):
        feature_maps(dictionary, chat(model), [PICTURE], do_image_splitting=False)
    with pytest.raises(ValueError, match="padding among an image's patches"):
        resolve(model, ["vision.tower_output"], "image")
