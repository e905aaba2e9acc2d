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
