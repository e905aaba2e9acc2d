"""Where an Idefics3 or SmolVLM image token lies over the image, checked against the image
processor itself on 60 image sizes: the tiles it cuts (the ``<row_r_col_c>`` tags it
writes, then ``<global-img>``) and, token by token, the cell of the frame a probe lights
up when only the pixels of that token's box are white.

Idefics2's tokens are a perceiver's latents, one row of them per frame (4 crops and the
whole image): its frames are checked against the image processor (their number, their
sizes, the pixels of each crop), and each frame's box against the model, a pixel changed
inside it changing that frame's latents and one outside it none.

Geometry runs the processor, not the model, so the models here are built lazily (no
weights read), but for Idefics2's probes of the connector."""

from __future__ import annotations

import math
import re
import sys

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

FAMILIES = ("idefics3", "smolvlm")
#: (width, height): squares, strips, odd sides, sides either side of a tile and of the
#: longest edge (64 on idefics3, 128 on smolvlm), images smaller and larger than a frame.
SIZES = (
    (1, 1), (7, 7), (9, 13), (16, 16), (31, 33), (32, 32), (33, 32), (40, 17), (48, 64), (63, 63),
    (64, 64), (65, 64), (64, 65), (70, 30), (96, 96), (100, 1), (1, 100), (112, 84), (84, 112), (120, 90),
    (127, 128), (128, 127), (128, 128), (129, 129), (130, 20), (20, 130), (150, 60), (60, 150), (160, 159),
    (200, 200), (200, 50), (50, 200), (256, 192), (192, 256), (255, 3), (3, 255), (300, 299), (301, 100),
    (100, 301), (17, 230), (230, 17), (333, 250), (250, 333), (77, 77), (90, 91), (91, 90), (45, 120),
    (120, 45), (64, 96), (96, 64), (72, 70), (5, 40), (40, 5), (180, 120), (120, 180), (95, 33), (33, 95),
    (140, 100), (100, 140), (222, 111),
)
TAG = re.compile(r"<row_\d+_col_\d+>|<global-img>")


@pytest.fixture(scope="module")
def lazy():
    cache: dict[str, StandardizedTransformer] = {}

    def get(name: str) -> StandardizedTransformer:
        if name not in cache:
            cache[name] = StandardizedTransformer(str(build(name)), task="image-text-to-text", dispatch=False)
        return cache[name]

    return get


def test_sizes_are_many_and_distinct():
    assert len(set(SIZES)) == len(SIZES) >= 50


@pytest.mark.parametrize("name", FAMILIES)
def test_grids_are_the_tiles_the_processor_cuts_then_the_global_image(lazy, name):
    model = lazy(name)
    prompt = chat(model)
    for size in SIZES:
        (geometry,) = model.vision.geometry(prompt, [image(*size)])
        encoding = model.processor(text=prompt, images=[image(*size)], return_tensors="pt")
        tags = [token for token in model.tokenizer.convert_ids_to_tokens(encoding["input_ids"][0]) if TAG.fullmatch(token)]
        assert [f"<{grid.label}>" if grid.label != "global" else "<global-img>" for grid in geometry.grids] == tags, size
        assert encoding["pixel_values"].shape[1] == len(geometry.grids), size
        side = model._module.config.vision_config.image_size // model.vision.patch_size // model._module.config.scale_factor
        assert all((g.rows, g.columns, g.fold) == (side, side, model._module.config.scale_factor) for g in geometry.grids)


def _probe(size, box) -> Image.Image:
    """Black, with white on every pixel whose centre is in ``box``."""
    width, height = size
    xs, ys = torch.arange(width) + 0.5, torch.arange(height) + 0.5
    inside = ((xs >= box[0]) & (xs < box[2]))[None, :] & ((ys >= box[1]) & (ys < box[3]))[:, None]
    return Image.fromarray((inside[..., None].expand(-1, -1, 3).to(torch.uint8) * 255).numpy())


def _holds_a_pixel(box, size, processor) -> bool:
    """Whether ``box`` holds a whole pixel, of the image and of the image as the processor
    first resizes it (a strip squeezed to one pixel high has lost its rows): a token over
    less than a pixel shares it with its neighbours, and no probe tells them apart."""
    own = sys.modules[type(processor).__module__]  # the processor's own module and helper
    width, height = size
    resized = own.get_resize_output_image_size(torch.empty(1, height, width), processor.size.longest_edge)
    x_scale, y_scale = resized[1] / width, resized[0] / height
    for x0, y0, x1, y1 in (box, (box[0] * x_scale, box[1] * y_scale, box[2] * x_scale, box[3] * y_scale)):
        if math.ceil(x0) + 1 > x1 or math.ceil(y0) + 1 > y1:
            return False
    return True


def _cells(frame: torch.Tensor, cell: int, side: int) -> torch.Tensor:
    """Mean brightness of each token's ``cell`` x ``cell`` pixels of a ``[3, tile, tile]``
    frame, in the tokens' raster order."""
    seen = frame[:, : side * cell, : side * cell]
    return seen.reshape(3, side, cell, side, cell).mean((0, 2, 4)).reshape(-1)


@pytest.mark.parametrize("name", FAMILIES)
def test_a_tokens_box_is_the_cell_the_processor_gives_its_token(lazy, name):
    """Every token whose box holds a whole pixel: a probe white on that box alone is
    brightest, in its grid's frame, in that token's cell (its fold x fold patches)."""
    model = lazy(name)
    config = model._module.config
    cell = model.vision.patch_size * config.scale_factor
    checked = total = 0
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        total += geometry.tokens
        probes, expected = [], []
        for index, grid in enumerate(geometry.grids):
            for token, box in enumerate(grid.boxes.tolist()):
                if _holds_a_pixel(box, size, model.processor.image_processor):
                    probes.append(_probe(size, box))
                    expected.append((index, token, grid.rows))
        if not probes:
            continue
        pixels = model.processor.image_processor(images=probes, return_tensors="pt")["pixel_values"][0]
        frames = len(geometry.grids)
        for number, (index, token, side) in enumerate(expected):
            assert int(_cells(pixels[number * frames + index], cell, side).argmax()) == token, (size, index, token)
        checked += len(expected)
    assert checked > 0.75 * total, (checked, total)  # the rest lie over less than a pixel


@pytest.mark.parametrize("name", FAMILIES)
def test_the_tiles_and_the_global_image_each_cover_the_image_once(lazy, name):
    model = lazy(name)
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        width, height = size
        tiles, whole = geometry.grids[:-1], geometry.grids[-1]
        for boxes in ([grid.boxes for grid in tiles], [whole.boxes]):
            if not boxes:
                continue
            boxes = torch.cat(boxes)
            area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
            assert torch.isclose(area, torch.tensor(float(width * height), dtype=torch.float64)), size
            assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= width + 1e-9).all() and (boxes[:, 3] <= height + 1e-9).all()


@pytest.mark.parametrize("name", FAMILIES)
def test_several_prompts_take_a_list_of_images_per_prompt(lazy, name):
    """SmolVLM's processor needs the images of several prompts as a list per prompt;
    geometry takes them as the trace does, image by image in order."""
    model = lazy(name)
    prompts = [chat(model, images=2), chat(model)]
    images = [image(112, 84), image(30, 60, seed=1), image(200, 50, seed=2)]
    geometry = model.vision.geometry(prompts, [images[:2], images[2:]])
    encoding = model.processor(text=prompts, images=[images[:2], images[2:]], padding=True, return_tensors="pt")
    mask = encoding["input_ids"] == model._module.config.image_token_id
    assert [g.row for g in geometry] == [0, 0, 1] and [g.size for g in geometry] == [i.size for i in images]
    for row in (0, 1):
        assert torch.equal(torch.cat([g.positions for g in geometry if g.row == row]), mask[row].nonzero()[:, 0])


@pytest.mark.parametrize("settings", [
    {"size": {"longest_edge": 80}, "max_image_size": {"longest_edge": 32}},  # a longest edge no multiple of a tile
    {"size": {"longest_edge": 64}, "max_image_size": {"longest_edge": 32}, "do_image_splitting": False},
    {"size": {"height": 50, "width": 90}, "max_image_size": {"longest_edge": 32}},
])
@pytest.mark.parametrize("name", FAMILIES)
def test_the_split_is_the_processors_under_other_settings(name, settings):
    """The tiles the plugin computes are the rows and columns the image processor reports
    (``return_row_col_info``), under settings the tiny checkpoints do not use."""
    import transformers

    from vlreg_idefics.geometry import split

    processor = getattr(transformers, {"idefics3": "Idefics3ImageProcessor", "smolvlm": "SmolVLMImageProcessor"}[name])(
        **settings
    )
    for size in SIZES:
        found = processor(images=[image(*size)], return_row_col_info=True, return_tensors="pt")
        rows, columns, _, _ = split(processor, size[1], size[0])
        assert (rows, columns) == (found["rows"][0][0], found["cols"][0][0]), size
        assert found["pixel_values"].shape[1] == rows * columns + 1, size


# -- Idefics2: each frame's latents, over the part of the image the frame shows ----------

IDEFICS2_SETTINGS = (
    {"size": {"shortest_edge": 16, "longest_edge": 64}, "do_image_splitting": True},  # the tiny checkpoint's
    {"size": {"shortest_edge": 16, "longest_edge": 64}, "do_image_splitting": False},
    {"size": {"shortest_edge": 40, "longest_edge": 100}, "do_image_splitting": True},  # small crops raised
    {"size": {"height": 50, "width": 90}, "do_image_splitting": True},
    {"do_resize": False, "do_image_splitting": True},
)
#: Idefics2's processor splits an image at its middle, so a side of 1 makes an empty crop,
#: which it fails on (a ZeroDivisionError in transformers): those sizes are left out.
IDEFICS2_SIZES = tuple(size for size in SIZES if min(size) > 1)


def _extents(mask: torch.Tensor) -> list[tuple[int, int]]:
    """Each frame's own (height, width) in a ``[frames, height, width]`` pixel mask."""
    return [(int(frame[:, 0].sum()), int(frame[0, :].sum())) for frame in mask]


@pytest.mark.parametrize("settings", IDEFICS2_SETTINGS)
def test_idefics2_frames_are_the_ones_the_image_processor_makes(settings):
    """The frames, and the size each is resized to, are the image processor's: as many as
    it makes, each as large as its pixel mask's own pixels."""
    from transformers import Idefics2ImageProcessor

    from vlreg_idefics.geometry import frames, resized

    processor = Idefics2ImageProcessor(**settings)
    for size in IDEFICS2_SIZES:
        made = processor(images=[image(*size)], return_tensors="pt")
        cut = frames(processor, *size)
        assert len(cut) == made["pixel_values"].shape[1], size
        expected = [resized(processor, y1 - y0, x1 - x0) for _, (x0, y0, x1, y1) in cut]
        assert _extents(made["pixel_attention_mask"][0]) == expected, size


def test_idefics2_crops_are_the_pixels_the_processor_cuts():
    """Left unresized, unscaled and unnormalized, each frame holds exactly the original
    pixels of its crop, top left, top right, bottom left, bottom right, then the whole."""
    from transformers import Idefics2ImageProcessor

    from vlreg_idefics.geometry import CROPS, frames

    processor = Idefics2ImageProcessor(do_resize=False, do_rescale=False, do_normalize=False, do_image_splitting=True)
    for size in IDEFICS2_SIZES:
        picture = image(*size, seed=3)
        pixels = torch.from_numpy(numpy_of(picture)).permute(2, 0, 1).float()
        made = processor(images=[picture], return_tensors="pt")["pixel_values"][0]
        cut = frames(processor, *size)
        assert [label for label, _ in cut] == [*CROPS, "global"]
        for frame, (_, (x0, y0, x1, y1)) in zip(made, cut):
            assert torch.equal(frame[:, : y1 - y0, : x1 - x0], pixels[:, y0:y1, x0:x1]), size


def numpy_of(picture: Image.Image):
    import numpy

    return numpy.asarray(picture.convert("RGB")).copy()


def test_idefics2_grids_are_a_row_of_latents_per_frame(lazy):
    """One grid per frame, in the processor's order, each a row of the perceiver's latents
    (resampled: no fold of patches), every token of a grid over the same box."""
    model = lazy("idefics2")
    latents = model._module.config.perceiver_config.resampler_n_latents
    prompt = chat(model)
    for size in IDEFICS2_SIZES:
        (geometry,) = model.vision.geometry(prompt, [image(*size)])  # checks the tokens against the encoding
        frames = model.processor(text=prompt, images=[image(*size)], return_tensors="pt")["pixel_values"].shape[1]
        assert [grid.label for grid in geometry.grids] == ["top_left", "top_right", "bottom_left", "bottom_right", "global"]
        assert len(geometry.grids) == frames and geometry.tokens == frames * latents
        for grid in geometry.grids:
            assert grid.resampled and (grid.rows, grid.columns) == (1, latents)
            assert torch.equal(grid.boxes, grid.boxes[:1].expand(latents, 4)) or grid.boxes.isnan().all()


def _blurred(processor, crop, box) -> list[tuple[str, float, float]]:
    """Where the resize blurs a frame's edge: the edges of its box inside its crop (past
    them, the frame's last partial patch, which no latent sees), as ``(axis, at, reach)``
    where the frame is resized (the bilinear kernel's reach, in the original's pixels); a
    crop's own edges are cut before the resize, so they are sharp."""
    from vlreg_idefics.geometry import resized

    x0, y0, x1, y1 = crop
    height, width = resized(processor, y1 - y0, x1 - x0)
    if (height, width) == (y1 - y0, x1 - x0):
        return []
    reach = 2 * max((x1 - x0) / width, (y1 - y0) / height, 1.0) + 1
    return [(axis, float(at), reach) for axis, at, edge in (("x", box[2], x1), ("y", box[3], y1)) if at < edge]


def _changed(frames: torch.Tensor, other: torch.Tensor) -> list[bool]:
    return [not torch.equal(a, b) for a, b in zip(frames, other)]


@pytest.fixture(scope="module")
def idefics2():
    return StandardizedTransformer(str(build("idefics2")), task="image-text-to-text", dispatch=True,
                                   attn_implementation="eager", device="cpu")


@pytest.mark.parametrize("size", [(112, 84), (84, 112), (77, 77), (200, 50), (45, 120), (150, 60), (40, 17), (9, 13)])
def test_idefics2_a_pixel_reaches_exactly_the_frames_whose_box_holds_it(idefics2, size):
    """A latent's box is what it sees: a pixel changed inside a frame's box changes every
    latent of that frame, and one outside it (in another crop, or past the frame's last
    whole patch) changes none of them, read at the connector's output, frame by frame.
    Pixels the resize blurs across a box's edge are not probed."""
    from vlreg_idefics.geometry import frames

    model = idefics2
    processor = model.processor.image_processor
    prompt = chat(model)
    picture = image(*size, seed=5)
    (geometry,) = model.vision.geometry(prompt, [picture])
    boxes = [grid.boxes[0] for grid in geometry.grids]
    blurred = [zone for (_, crop), box in zip(frames(processor, *size), boxes) for zone in _blurred(processor, crop, box)]
    with model.trace(prompt, images=[picture]):
        plain = model.projector.output.save()
    generator = torch.Generator().manual_seed(sum(size))
    pixels = (torch.rand(400, 2, generator=generator) * torch.tensor(size)).long().tolist()
    pixels += [[size[0] - 1, size[1] - 1], [size[0] - 1, 0], [0, size[1] - 1]]  # the last pixels: past whole patches
    probes = []
    for x, y in pixels:
        centre = {"x": x + 0.5, "y": y + 0.5}
        if any(abs(centre[axis] - at) < reach for axis, at, reach in blurred):
            continue
        holds = [bool(not b.isnan().any() and b[0] <= centre["x"] < b[2] and b[1] <= centre["y"] < b[3]) for b in boxes]
        probes.append(((x, y), holds))
    kinds: dict[tuple, list] = {}
    for probe in probes:  # two of each kind: in a crop and the whole, the whole alone, none
        kinds.setdefault(tuple(probe[1]), []).append(probe)
    chosen = [probe for found in kinds.values() for probe in found[:2]]
    assert len(kinds) >= 4, (size, list(kinds))
    for (x, y), holds in chosen:
        changed = numpy_of(picture)
        changed[y, x] = 255 - changed[y, x] // 128 * 255  # to the far end: black or white
        with model.trace(prompt, images=[Image.fromarray(changed)]):
            probed = model.projector.output.save()
        assert _changed(probed, plain) == holds, (size, (x, y), holds)
