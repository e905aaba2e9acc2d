"""`vlreg.strips`: a score over a video drawn as a strip of its frames, each token's score in
its box in the frames it covers, a grid's score as a bar under its frames; the times the
processor writes (Qwen3-VL, GLM) read back by the geometry and written under the frames."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer
from vlreg.pictures import RAMP, colours
from vlreg.strips import CHART, frame_labels, frame_strip, strip
from vlreg.testing import build

COLOURS = ("red", "orange", "yellow", "green")


@pytest.fixture(scope="module")
def models():
    """Geometry needs the processor and the config only: meta builds, no weights read."""
    return {name: StandardizedTransformer(str(build(name)), task="image-text-to-text")
            for name in ("qwen2_vl", "qwen3_vl", "glm4v")}


def prompt_of(model) -> str:
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "What changes?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


@pytest.fixture(scope="module")
def video_and_geometry(models):
    """Four black frames on Qwen2-VL: two temporal patches (frames 0-1, 2-3) of 2 x 3 tokens."""
    model = models["qwen2_vl"]
    video = [Image.new("RGB", (84, 56), (0, 0, 0)) for _ in COLOURS]
    (geometry,) = model.vision.geometry(prompt_of(model), videos=[video])
    assert geometry.frames[[0, -1]].tolist() == [[0, 1], [2, 3]]
    return video, geometry


def centre(panel, box) -> tuple[int, int]:
    return panel[0] + round(float(box[0] + box[2]) / 2), panel[1] + round(float(box[1] + box[3]) / 2)


def test_a_strip_has_one_panel_per_frame_at_its_size(video_and_geometry):
    video, geometry = video_and_geometry
    drawn = strip(video, geometry, torch.rand(geometry.tokens), title="t", caption="c")
    panels = drawn.info["panels"]
    assert drawn.info["frames"] == [0, 1, 2, 3] and len(panels) == 4
    assert all((x1 - x0, y1 - y0) == video[0].size for x0, y0, x1, y1 in panels)
    assert all(a[1] == b[1] and a[2] < b[0] for a, b in zip(panels, panels[1:]))   # one row, left to right
    some = strip(video, geometry, torch.rand(geometry.tokens), frames=[3, 1], columns=1, zoom=2)
    assert some.info["frames"] == [3, 1] and len(some.info["panels"]) == 2
    (x0, y0, x1, y1), below = some.info["panels"]
    assert (x1 - x0, y1 - y0) == (168, 112) and below[1] > y1                       # one column


def test_a_tokens_score_lands_in_its_box_in_the_frames_it_covers(video_and_geometry):
    """A synthetic score: 3 at one token of the second temporal patch, 1 at one of the
    first, 0 elsewhere. Painted opaquely over black frames, the first's box shows 1's colour
    in frames 0 and 1 only, the second's 3's (the top) in frames 2 and 3 only, on one scale."""
    video, geometry = video_and_geometry
    first, second = 4, 6 + 1   # token 4 of patch 0, token 1 of patch 1
    scores = torch.zeros(geometry.tokens)
    scores[first], scores[second] = 1.0, 3.0
    drawn = strip(video, geometry, scores, alpha=1.0, lines=False)
    panels = drawn.info["panels"]
    colour = lambda value: tuple(colours(torch.tensor(value / 3)).round().to(torch.uint8).tolist())  # noqa: E731
    assert colour(3.0) == RAMP[-1]
    for frame, panel in enumerate(panels):
        at_first = drawn.getpixel(centre(panel, geometry.boxes[first]))
        at_second = drawn.getpixel(centre(panel, geometry.boxes[second]))
        if frame < 2:
            assert at_first == colour(1.0) and at_second == colour(0.0)   # token 1 of patch 0 scores 0
        else:
            assert at_second == RAMP[-1] and at_first == colour(0.0)      # token 4 of patch 1 scores 0


def test_a_video_as_an_array_draws_the_same_strip(video_and_geometry):
    video, geometry = video_and_geometry
    scores = torch.linspace(0, 1, geometry.tokens)
    as_list = np.asarray(strip(video, geometry, scores))
    assert (np.asarray(strip(np.stack([np.asarray(f) for f in video]), geometry, scores)) == as_list).all()
    tensor = torch.stack([torch.from_numpy(np.asarray(f)).permute(2, 0, 1) for f in video])   # [T, C, H, W]
    assert (np.asarray(strip(tensor, geometry, scores)) == as_list).all()


def test_bad_input_is_refused_before_drawing(video_and_geometry, models):
    video, geometry = video_and_geometry
    with pytest.raises(ValueError, match=r"\(5,\) scores for a video of 12 tokens.*frame_strip"):
        strip(video, geometry, torch.rand(5))
    with pytest.raises(ValueError, match=r"\(3, 2\) scores for a video of 2 grids.*scores\[-1\]"):
        frame_strip(video, geometry, torch.rand(3, 2))
    with pytest.raises(ValueError, match="cover frames up to 3, but the video has 2 frames"):
        strip(video[:2], geometry, torch.rand(geometry.tokens))
    with pytest.raises(ValueError, match=r"the geometry is of \(84, 56\) frames"):
        strip([Image.new("RGB", (56, 56))] * 4, geometry, torch.rand(geometry.tokens))
    with pytest.raises(ValueError, match="frames=\\[4\\]: the video has frames 0 to 3"):
        strip(video, geometry, torch.rand(geometry.tokens), frames=[4])
    with pytest.raises(ValueError, match="2 labels for 4 frames"):
        frame_strip(video, geometry, torch.rand(2), labels=["a", "b"])
    model = models["qwen2_vl"]
    image_prompt = prompt_of(model).replace("<|video_pad|>", "<|image_pad|>")
    (image,) = model.vision.geometry(image_prompt, [video[0]])
    with pytest.raises(TypeError, match="VideoGeometry"):
        strip(video, image, torch.rand(image.tokens))


def test_a_grids_score_is_a_bar_under_the_frames_it_covers(video_and_geometry):
    """Scores 1 and -1 for the two temporal patches, on a scale from -1 to 1: under frames 0
    and 1 a bar in the ramp's top colour above the zero line, under 2 and 3 one in its
    bottom colour below it, each frame in its own colours above."""
    _, geometry = video_and_geometry
    video = [Image.new("RGB", (84, 56), colour) for colour in COLOURS]
    drawn = frame_strip(video, geometry, torch.tensor([1.0, -1.0]), label="drop (logits)")
    chart = round(56 * CHART)
    for frame, (x0, y0, x1, y1) in enumerate(drawn.info["panels"]):
        assert drawn.getpixel(((x0 + x1) // 2, (y0 + y1) // 2)) == video[frame].getpixel((0, 0))
        upper = drawn.getpixel(((x0 + x1) // 2, y1 + chart // 4))
        lower = drawn.getpixel(((x0 + x1) // 2, y1 + 3 * chart // 4))
        if frame < 2:
            assert upper == RAMP[-1] and lower == (255, 255, 255)
        else:
            assert upper == (255, 255, 255) and lower == RAMP[0]


@pytest.mark.parametrize("name", ["qwen3_vl", "glm4v"])
def test_the_times_the_processor_writes_are_under_the_frames(models, name):
    """Qwen3-VL writes ``<2.5 seconds>`` before each temporal patch, GLM a whole second after
    each: the geometry reads them back, and the strip writes each under the patch's frames."""
    model = models[name]
    video = [Image.new("RGB", (84, 56), colour) for colour in COLOURS + ("blue", "black")]
    options = {"do_sample_frames": False,
               "video_metadata": [{"fps": 1.0, "total_num_frames": 6, "frames_indices": list(range(6))}]}
    prompt = prompt_of(model)
    (geometry,) = model.vision.geometry(prompt, videos=[video], **options)
    encoding = model.processor(text=prompt, videos=[video], return_tensors="pt", **options)
    text = model.tokenizer.decode(encoding["input_ids"][0])
    written = [float(t) for t in re.findall(r"<(\d+(?:\.\d+)?) seconds>|<\|end_of_image\|>(\d+)", text) for t in t if t]
    assert [grid.seconds for grid in geometry.grids] == written and len(set(written)) == 3
    assert frame_labels(geometry, [0, 1, 4]) == [f"frame 0 · {written[0]:g} s", f"frame 1 · {written[0]:g} s",
                                                  f"frame 4 · {written[2]:g} s"]
    scores = torch.rand(geometry.tokens)
    timed = np.asarray(strip(video, geometry, scores))
    plain = np.asarray(strip(video, geometry, scores, labels=[f"frame {k}" for k in range(6)]))
    bottom = strip(video, geometry, scores).info["panels"][0][3]
    assert (timed[:bottom] == plain[:bottom]).all() and (timed[bottom:] != plain[bottom:]).any()   # the times, below
