"""Where MiniCPM-V's image tokens sit: an image's source image, then its slices, each a grid.

* a large image is its source image and ``rows`` x ``columns`` slices, a grid each, in the
  order the processor writes them; each grid's boxes tile the whole image (the source image)
  or its own part of it (a slice), and the grids count the mask's tokens;
* a small image is its source image alone;
* a video is each frame cut as an image is, frame after frame: its source frame, then its
  slices, each grid as many tokens as the processor's ``target_sizes_videos`` row makes and
  over its own frame, as the options the processor runs with cut it;
* a token reads exactly its own rows of the last block: raising the rows `patch_block` names
  for one token (in that block's rows, 2 x 2 patches each after the ``vit_merger``, 1 in
  MiniCPM-OCR's ``"4x"`` mode) moves that token's features and no other's.
"""

from __future__ import annotations

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image, moved_features, patch_block

CHECKPOINTS = ("minicpmv4_6", "minicpm_ocr")


def area(boxes: torch.Tensor) -> float:
    return float(((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum())


def test_a_large_image_is_its_source_image_then_its_slices(model):
    size = (112, 84)
    prompt = chat(model, text="Read it.")
    (geometry,) = model.vision.geometry(prompt, [image(*size)])
    side = 2 if model.config.downsample_mode == "4x" else 4  # patches a token (MiniCPM-OCR's mode: "4x")
    assert [grid.label for grid in geometry.grids] == ["source image", "slice 0,0", "slice 0,1", "slice 1,0", "slice 1,1"]
    assert {grid.fold for grid in geometry.grids} == {side}
    with model.trace(prompt, images=[image(*size)]):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), geometry.positions)
    source, *slices = geometry.grids
    assert area(source.boxes) == pytest.approx(size[0] * size[1])
    assert sum(area(one.boxes) for one in slices) == pytest.approx(size[0] * size[1])
    last = slices[3]  # the bottom right slice's last token: the image's bottom right corner
    width, height = size[0] / 2 / last.columns, size[1] / 2 / last.rows
    assert last.boxes[-1].tolist() == pytest.approx([size[0] - width, size[1] - height, *size])


def test_a_small_image_is_its_source_image_alone(model):
    (geometry,) = model.vision.geometry(chat(model, text="Read it."), [image(30, 20)])
    (grid,) = geometry.grids
    assert grid.label == "source image" and grid.covered.all() and area(grid.boxes) == pytest.approx(600)


def test_a_video_is_each_frame_cut_as_an_image_is(model):
    video = [image(112, 84, seed=k) for k in range(2)]
    prompt = chat(model, "video", text="Read it.")
    (geometry,) = model.vision.geometry(prompt, videos=[video])
    (still,) = model.vision.geometry(chat(model, text="Read it."), [video[0]])
    labels = ["frame", "slice 0,0", "slice 0,1", "slice 1,0", "slice 1,1"]
    assert [grid.label for grid in geometry.grids] == labels * 2
    assert [grid.frames for grid in geometry.grids] == [(0, 0)] * 5 + [(1, 1)] * 5
    sizes = model.processor(text=[prompt], videos=[video], return_tensors="pt")["target_sizes_videos"]
    assert [grid.tokens * grid.fold**2 for grid in geometry.grids] == sizes.prod(-1).tolist()
    for first in (0, 5):
        frame = geometry.grids[first:first + 5]
        assert [torch.equal(one.boxes, other.boxes) for one, other in zip(frame, still.grids)] == [True] * 5
    (whole,) = model.vision.geometry(prompt, videos=[video], slice_mode=False)  # the option reaches the video's cut
    assert [(grid.label, grid.frames) for grid in whole.grids] == [("frame", (0, 0)), ("frame", (1, 1))]


def test_a_token_reads_exactly_its_rows_of_the_last_block(model):
    prompt, pictures = chat(model, text="Read it."), [image(112, 84)]
    (geometry,) = model.vision.geometry(prompt, pictures)
    last = model.vision.num_layers - 1
    first = 0
    for number, grid in enumerate(geometry.grids):
        fold = grid.fold // model.vision.layer_fold(last)
        for token in (0, grid.tokens - 1) if number in (0, 4) else ():
            rows = patch_block(grid, token, first, fold)
            assert moved_features(model, prompt, pictures, 0, rows) == [geometry.span(number).start + token]
        first += grid.tokens * fold**2


def test_a_lit_pixel_in_a_kept_frame_lands_in_that_frames_units_in_the_token_whose_box_holds_it(model):
    """A 4-a-second clip of 10 frames (2.5 s), sampled: the video processor keeps a frame a
    second (0, 4, 8) and cuts each as an image, its source frame and slices a unit each, the
    units' patches side by side in ``pixel_values_videos`` (each unit's patches one after the
    other, a patch ``patch_size`` columns). Each grid is one unit of one kept frame, a trace's
    video mask counts the geometry's tokens, and a white pixel at a token's box's centre in a
    kept frame lands in that token's patches of the grid's unit and in no other frame's units."""
    import numpy

    sampled = {"do_sample_frames": True, "video_metadata": [{"fps": 4, "total_num_frames": 10, "duration": 2.5}]}
    width, height, patch = 112, 84, model.processor.video_processor.patch_size
    prompt, clip = chat(model, "video", text="Read it."), numpy.zeros((10, height, width, 3), dtype=numpy.uint8)
    (geometry,) = model.vision.geometry(prompt, videos=[clip], **sampled)
    kept = model.processor(text=prompt, videos=[clip], return_metadata=True, **sampled)["video_metadata"][0]
    assert kept.frames_indices == [0, 4, 8]
    assert [grid.frames for grid in geometry.grids] == [(k, k) for k in (0, 4, 8) for _ in range(5)]
    with model.trace(prompt, videos=[clip], **sampled):
        mask = model.vision.video_token_mask.save()
    assert int(mask.sum()) == geometry.tokens
    for index, grid in enumerate(geometry.grids):
        (frame, _) = grid.frames
        for token in range(0, grid.tokens, 3):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            shot = clip.copy()
            shot[frame, int((y0 + y1) / 2), int((x0 + x1) / 2)] = 255
            encoding = model.processor(text=prompt, videos=[shot], return_tensors="pt", **sampled)
            pixels, sizes = encoding["pixel_values_videos"][0], encoding["target_sizes_videos"].tolist()
            ends = numpy.cumsum([rows * columns * patch for rows, columns in sizes])
            starts = [0, *ends[:-1]]
            unit = pixels[..., starts[index]:ends[index]]
            spot = int(unit.flatten(0, 1).max(0).values.argmax()) // patch  # the brightest patch of the unit
            row, column = divmod(spot, sizes[index][1])
            assert (row // grid.fold) * grid.columns + column // grid.fold == token
            others = [k for k, other in enumerate(geometry.grids) if other.frames != grid.frames]
            assert all(pixels[..., starts[k]:ends[k]].max() < unit.max() for k in others)


def test_stacked_frames_are_refused_by_name(model):
    """With ``stack_frames`` > 1 the processor tiles each second's extra frames into one picture:
    a token there has no box in one frame, so the video's geometry is refused, saying why."""
    import numpy

    from vlreg.plugin import Unavailable

    sampled = {"do_sample_frames": True, "stack_frames": 2,
               "video_metadata": [{"fps": 4, "total_num_frames": 10, "duration": 2.5}]}
    clip = numpy.zeros((10, 84, 112, 3), dtype=numpy.uint8)
    with pytest.raises(Unavailable, match="stack_frames=2.*tiles each second's extra frames"):
        model.vision.geometry(chat(model, "video", text="Read it."), videos=[clip], **sampled)
