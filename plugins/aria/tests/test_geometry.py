"""Where an Aria image token lies over the image: a row of learned queries per crop, each
over the crop's part of the image, checked against the image processor (how many crops it
makes, that they tile the image) and against the model: a pixel changed inside a crop's
box changes that crop's queries, and one outside it none, read at the projector's output.
"""

from __future__ import annotations

import numpy
import pytest
import torch
from PIL import Image

from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "aria"

#: (width, height): squares, strips, sides either side of a frame (490) and of two.
SIZES = ((1, 1), (7, 7), (40, 17), (112, 84), (84, 112), (300, 299), (489, 490), (490, 490), (491, 490), (600, 200),
         (200, 600), (980, 490), (990, 500), (1000, 1000), (1500, 400), (400, 1500), (2000, 300), (333, 250),
         (250, 333), (1200, 900), (77, 1300), (1300, 77))
SETTINGS = ({}, {"split_image": True}, {"max_image_size": 490}, {"max_image_size": 490, "split_image": True})


@pytest.mark.parametrize("settings", SETTINGS)
def test_a_row_of_queries_per_crop_the_processor_makes_tiling_the_image(model, settings):
    """As many grids as the processor makes frames, each a row of the queries the projector
    gives a frame of that side (resampled: no fold of patches); the crops' boxes cover the
    image once."""
    prompt = chat(model)
    config = model._module.config
    side = settings.get("max_image_size", 980)
    queries = config.projector_patch_to_query_dict[(side // model.vision.patch_size) ** 2]
    for size in SIZES:
        (geometry,) = model.vision.geometry(prompt, [image(*size)], **settings)  # checks the tokens against the encoding
        frames = model.processor(text=prompt, images=[image(*size)], return_tensors="pt", **settings)["pixel_values"]
        assert len(geometry.grids) == frames.shape[0] and frames.shape[-1] == side, size
        assert all(g.resampled and (g.rows, g.columns) == (1, queries) for g in geometry.grids)
        boxes = torch.stack([g.boxes[0] for g in geometry.grids if not g.boxes.isnan().any()])
        area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
        torch.testing.assert_close(area, torch.tensor(float(size[0] * size[1]), dtype=torch.float64))
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= size[0] + 1e-9).all() and (boxes[:, 3] <= size[1] + 1e-9).all()


def _changed(frames: torch.Tensor, other: torch.Tensor) -> list[bool]:
    return [not torch.equal(a, b) for a, b in zip(frames, other)]


@pytest.mark.parametrize("size, settings", [
    ((112, 84), {}), ((600, 200), {"split_image": True, "max_image_size": 490}),
    ((200, 600), {"split_image": True, "max_image_size": 490}), ((1000, 1000), {"split_image": True, "max_image_size": 490}),
    ((1500, 400), {"split_image": True}), ((300, 299), {"split_image": True, "max_image_size": 490}),
])
def test_a_pixel_reaches_exactly_the_crops_whose_box_holds_it(model, size, settings):
    """A pixel changed inside a crop's box changes every query of that crop and no other
    crop's. Pixels the canvas's resize blurs across an edge between crops are not probed."""
    prompt = chat(model)
    picture = image(*size, seed=5)
    (geometry,) = model.vision.geometry(prompt, [picture], **settings)
    boxes = [grid.boxes[0] for grid in geometry.grids]
    edges = [(axis, float(at)) for box in boxes if not box.isnan().any() for axis, at in
             (("x", box[0]), ("x", box[2]), ("y", box[1]), ("y", box[3])) if 0 < at < size[0 if axis == "x" else 1]]
    reach = 2 * max(1.0, size[0] / 490, size[1] / 490) + 2  # the canvas resize's kernel, in the original's pixels
    with model.trace(prompt, images=[picture], **settings):
        plain = model.projector.output.save()
    generator = torch.Generator().manual_seed(sum(size))
    kinds: dict[tuple, list] = {}
    for x, y in (torch.rand(300, 2, generator=generator) * torch.tensor(size)).long().tolist():
        centre = {"x": x + 0.5, "y": y + 0.5}
        if any(abs(centre[axis] - at) < reach for axis, at in edges):
            continue
        holds = tuple(bool(not b.isnan().any() and b[0] <= centre["x"] < b[2] and b[1] <= centre["y"] < b[3]) for b in boxes)
        kinds.setdefault(holds, []).append((x, y))
    assert all(sum(holds) == 1 for holds in kinds), "every pixel is in one crop"
    assert len(kinds) == sum(not b.isnan().any() for b in boxes), (size, list(kinds))
    for holds, pixels in kinds.items():
        for x, y in pixels[:2]:
            changed = numpy.asarray(picture).copy()
            changed[y, x] = 255 - changed[y, x] // 128 * 255  # to the far end: black or white
            with model.trace(prompt, images=[Image.fromarray(changed)], **settings):
                probed = model.projector.output.save()
            assert _changed(probed, plain) == list(holds), (size, (x, y), holds)
