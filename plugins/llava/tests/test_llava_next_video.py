"""The LLaVA lines built for videos, LLaVA-NeXT-Video and Video-LLaVA: their images are
served (the conformance suite runs in ``test_conformance.py``), and their videos (Video-LLaVA's
through a tower of their own, ``vision.video_tower``); their prompt format, where a lit
pixel lands, Video-LLaVA's ``pixel_values_images``, and the published widths on meta.
"""

from __future__ import annotations

import numpy
import pytest
import torch
from transformers import AutoProcessor, LlavaNextVideoConfig, VideoLlavaConfig

from vlreg import StandardizedTransformer, Unavailable
from vlreg.cli import partial
from vlreg.testing import build, chat
from vlreg.testing.conformance import image, lit


CHECKPOINTS = ("llava_next_video", "video_llava")
#: The pixels' key in each processor's encoding.
PIXELS = {"llava_next_video": "pixel_values", "video_llava": "pixel_values_images"}


def name_of(model) -> str:
    return model._module.config.model_type


def clip(frames: int = 4, seed: int = 0):
    return [numpy.random.default_rng(seed).integers(0, 255, (frames, 56, 56, 3), dtype=numpy.uint8)]


def test_the_prompt_is_vicunas_a_turns_images_then_its_videos(model):
    assert chat(model, "image") == "USER: <image>\nWhat is in this image? ASSISTANT:"
    assert chat(model, "video", "image") == "USER: <image>\n<video>\nWhat is in this image? ASSISTANT:"
    conversation = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "And?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A ball."}]},
        {"role": "user", "content": [{"type": "text", "text": "Why?"}]},
    ]
    assert model.processor.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False) == (
        "Be brief. USER: <video>\nAnd? ASSISTANT: A ball. USER: Why? ASSISTANT:"
    )


def test_a_video_only_trace_refuses_the_images_values_and_the_model_still_runs_on_it(model):
    """``support()["videos"]`` says how the tower's values are told apart on a video:
    LLaVA-NeXT-Video runs a video's frames through the image's tower, Video-LLaVA through a
    tower of their own, served at ``vision.video_tower`` (neither is partial). On a prompt with
    only a video the image's values refuse before the model runs, and the logits are served."""
    assert model.support()["videos"] == model.vision.video_calls()
    assert any(row.startswith("vision.video_tower.") for row in model.support()) == (name_of(model) == "video_llava")
    assert partial().get(name_of(model)) is None
    prompt = chat(model, "video")
    with pytest.raises(Unavailable, match="no images, only videos"):
        with model.trace(prompt, videos=clip()):
            model.vision.image_features.save()
    with model.trace(prompt, videos=clip()):
        mask, logits = model.vision.image_token_mask.save(), model.logits.save()
    assert not mask.any() and logits.shape[1] == mask.shape[1]


def test_video_llavas_video_tower_is_the_videos_and_only_the_videos(model):
    """Video-LLaVA: ``vision.video_tower``'s values are its frames' call (what the projector
    reads of it reaches the video's features); on an image alone they refuse before the model
    runs, naming the video; the image tower's values are the image's, beside a video too."""
    if name_of(model) != "video_llava":
        pytest.skip("only Video-LLaVA runs a video's frames through a tower of their own")
    tower = model.vision.video_tower
    assert tower._module is model._module.model.video_tower and tower is not model.vision
    with pytest.raises(Unavailable, match="no video"):
        with model.trace(chat(model, "image"), images=[image(112, 84)]):
            tower.layers[0].layer_output.save()
    with pytest.raises(Unavailable, match="not its output"):
        with model.trace(chat(model, "video"), videos=clip()):
            tower.tower_output[:] = 0
    prompt = chat(model, "video", "image")
    with model.trace(prompt, videos=clip(), images=[image(112, 84)]):
        on_image = model.vision.layers[0].input.save()
        on_video = tower.layers[0].input.save()
    with model.trace(chat(model, "image"), images=[image(112, 84)]):
        image_alone = model.vision.layers[0].input.save()
    assert torch.equal(on_image, image_alone) and on_video.shape[0] == len(clip()[0])  # a row per frame


def test_an_images_features_are_the_same_beside_a_video(model):
    """The image's features are written at the first scatter, the video's at the second:
    the image's values on a prompt that also holds a video are the image's alone."""
    picture = image(112, 84)
    with model.trace(chat(model, "image"), images=[picture]):
        alone = model.vision.image_features.save()
    with model.trace(chat(model, "image", "video"), images=[picture], videos=clip()):
        mask = model.vision.image_token_mask.save()
        beside = model.vision.image_features.save()
        entering = model.layers[0].input.save()
    torch.testing.assert_close(beside, alone)
    assert torch.equal(entering[mask], beside)


@pytest.mark.parametrize("size", [(112, 84), (56, 56), (84, 140), (57, 61)])
def test_a_lit_pixel_lands_in_the_base_token_whose_box_holds_it(model, size):
    """The first grid after any CLS row is the tower's square (NeXT-Video's base crop,
    Video-LLaVA's centre crop): a pixel lit at a token's box centre is brightest in that
    token's patch of the pixels the tower gets."""
    (geometry,) = model.vision.geometry(chat(model, "image"), [image(*size)])
    base = next(grid for grid in geometry.grids if grid.label != "cls")
    patch = model._module.config.vision_config.patch_size
    for token in range(base.tokens):
        x0, y0, x1, y1 = base.boxes[token].tolist()
        if x1 - x0 < 2 or y1 - y0 < 2:
            continue  # a box narrower than two pixels holds no centre pixel of its own
        probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
        pixels = model.processor(text=chat(model, "image"), images=[probe], return_tensors="pt")[PIXELS[name_of(model)]]
        square = pixels.reshape(-1, *pixels.shape[-3:])[0].sum(0)  # the first crop: the base
        rows, columns = square.shape[0] // patch, square.shape[1] // patch
        brightest = square.reshape(rows, patch, columns, patch).amax((1, 3)).flatten().argmax()
        assert int(brightest) == token, (size, token)


def test_each_video_token_is_in_its_frame_on_the_processors_grid(model):
    """Each frame's tokens, frame by frame, cover that frame: LLaVA-NeXT-Video's pooled patches,
    Video-LLaVA's class row (over no pixels) then its patches, as many a frame as the processor
    writes; a patch's box holds the centre of its crop of a frame wider than tall."""
    video = [image(84, 56, seed=k) for k in range(2)]
    prompt = chat(model, "video")
    (geometry,) = model.vision.geometry(prompt, videos=[video])
    with model.trace(prompt, videos=[video]):
        mask = model.vision.video_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    frames = geometry.frames[:, 0]
    assert torch.equal(frames, frames.sort().values) and torch.bincount(frames).tolist() == [geometry.tokens // 2] * 2
    patches = [grid for grid in geometry.grids if grid.label != "cls"]
    assert len(patches) == 2 and all(torch.equal(grid.boxes, patches[0].boxes) for grid in patches)
    classes = [grid for grid in geometry.grids if grid.label == "cls"]
    assert len(classes) == (2 * model.processor.num_additional_image_tokens if name_of(model) == "video_llava" else 0)
    boxes = patches[0].boxes
    assert (boxes[:, 0] >= 0).all() and (boxes[:, 2] <= 84).all() and boxes[:, 3].max() == 56
    assert ((boxes[:, 0] <= 42) & (boxes[:, 2] >= 42) & (boxes[:, 1] <= 28) & (boxes[:, 3] >= 28)).any()


def test_video_llavas_pixels_are_found_under_their_own_name():
    """Video-LLaVA's image processor hands the pixels on as ``pixel_values_images``: the
    trace finds the image there (the mask, the features), and a tower cache made of it
    replays only into the same image."""
    model = StandardizedTransformer(str(build("video_llava")), task="image-text-to-text", dispatch=True, device="cpu")
    prompt, picture = chat(model, "image"), image(112, 84)
    encoding = model.processor(text=prompt, images=[picture], return_tensors="pt")
    assert "pixel_values_images" in encoding and "pixel_values" not in encoding
    with model.trace(prompt, images=[picture]):
        logits = model.logits.save()
    cache = model.vision.cache(prompt, [picture])
    assert set(cache.pixels) == {"pixel_values_images"}
    with model.trace(prompt, images=[picture]):
        cache.replay()
        replayed = model.logits.save()
    torch.testing.assert_close(replayed, logits)
    with pytest.raises(ValueError, match="pixel_values_images differ"):
        with model.trace(prompt, images=[image(112, 84, seed=5)]):
            cache.replay()
            model.logits.save()


#: model type -> (config class, text: blocks, width, heads, key/value heads; tower: blocks,
#: width, heads, side, patch), as transformers' config defaults give them (LLaVA-NeXT-Video-7B
#: and Video-LLaVA-7B: Vicuna-7B on CLIP ViT-L/14, at 336 and 224 pixels).
PUBLISHED = {
    "llava_next_video": (LlavaNextVideoConfig, (32, 4096, 32, 32), (24, 1024, 16, 336, 14)),
    "video_llava": (VideoLlavaConfig, (32, 4096, 32, 32), (24, 1024, 16, 224, 14)),
}


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_the_published_widths_on_meta(name, tmp_path):
    config_class, text, tower = PUBLISHED[name]
    config_class().save_pretrained(tmp_path)
    AutoProcessor.from_pretrained(build(name)).save_pretrained(tmp_path)  # nothing is processed on meta
    model = StandardizedTransformer(str(tmp_path), task="image-text-to-text", dispatch=False, attn_implementation="eager")
    assert not model.dispatched and model.family.name == "llava"
    assert (model.num_layers, model.hidden_size, model.num_heads, model.num_kv_heads) == text
    vision = model.vision
    assert (vision.num_layers, vision.vision_hidden_size, vision.num_heads, vision.image_size, vision.patch_size) == tower
    rows = model.support()
    assert {row for row, why in rows.items() if why} == {"videos"}
    # the projector reads block -2's stream out of the hidden states: the last block runs for nothing
    assert "edit vision.layers[22].layer_output" in model.read_only()["vision.tower_output"]
