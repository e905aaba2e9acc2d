"""Where a LLaVA image token lies, checked against the image processor and the model.

LLaVA-OneVision's (and LLaVA-NeXT's) declared grids against the image processor's own
tiling, on 60 image sizes, and OneVision's padded single crop for images given as a list
per prompt.

Each image is a ramp: a pixel's red value is its column, its green value its row, its
blue value 255 (the processor's padding is darker). The resizes reproduce a ramp (up to
rounding and clamping at the edges), so over the image pixels a token's patch holds, the
mean red and green, once the normalisation is undone, is the centre of what the token
sees in the original image. Tiles are laid side by side and unpadded with transformers'
own ``unpad_image``; where the model shrinks the grid, the centres are shrunk with the
model's bilinear interpolation (which maps a ramp to a ramp), over fully seen tokens.

LLaVA over Pixtral (Pixtral-12B's layout). The tower and its layout are vlreg-mistral3's
(the adapter ``"pixtral_image_grids"``); LLaVA's projector maps each 16-pixel patch to one
token.

* the grid is the image's ``[IMG]`` tokens, a token a patch (``fold`` 1), each row of them
  followed by ``[IMG_BREAK]`` (``[IMG_END]`` after the last), on images of many shapes;
* each token's box is over the pixels the processor puts in that token's cell: a probe
  lit at the box's centre is brightest inside the token's 16 x 16 cell of the canvas;
* on images the processor does not resize, a token's box is exactly its patch and the
  patch exactly its token: changing the pixels in the box changes that patch of the
  tower's packed row (and no other), and changing that patch's stream changes that
  token's features (and no other), for every token of two images of different shapes;
* where the layout cannot be served (the "default" strategy drops a patch Pixtral does
  not have to spare) the geometry refuses with the reason, not a TypeError.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.llava_onevision.modeling_llava_onevision import get_anyres_image_grid_shape, unpad_image

from vlreg import Unavailable
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit

SIZES = [(w, h) for w in (15, 40, 56, 77, 100, 112, 150, 168, 201, 255) for h in (19, 56, 84, 121, 170, 240)]


def ramp(width: int, height: int) -> Image.Image:
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    return Image.fromarray(np.stack([x, y, np.full_like(x, 255)], -1).astype(np.uint8))


def cells(model, crops: torch.Tensor) -> torch.Tensor:
    """``[crops, 3, side, side]`` normalised pixels -> per patch ``[crops, 3, n, n]``: the
    sums of red and green over its image pixels, and how many there are."""
    vision = model.processor.image_processor
    mean = torch.tensor(vision.image_mean, dtype=torch.float64)[:, None, None]
    std = torch.tensor(vision.image_std, dtype=torch.float64)[:, None, None]
    values = (crops.double() * std + mean) * 255
    seen = (values[:, 2] > 250).double()
    stacked = torch.stack([values[:, 0] * seen, values[:, 1] * seen, seen], 1)
    count, _, side, _ = stacked.shape
    patch = model.vision.patch_size
    return stacked.reshape(count, 3, side // patch, patch, side // patch, patch).sum((3, 5))


def check(grid, sums: torch.Tensor, where) -> None:
    """Each token's box against the centre of the image pixels behind it (``sums``:
    ``[3, tokens]``); a token behind none has no box. Tokens partly seen are checked
    on their seen part, which is their box cut to the image."""
    seen = sums[2] > 0
    assert torch.equal(seen, grid.covered), where
    if not seen.any():  # a sliver of an image: the model keeps no row of its tiles
        return
    boxes = grid.boxes[seen]
    centre = (sums[:2, seen] / sums[2, seen]).T + 0.5
    cell = (boxes[:, 2:] - boxes[:, :2]).max(0).values
    error = (centre - (boxes[:, :2] + boxes[:, 2:]) / 2).abs()
    assert (error <= 0.05 * cell + 0.5).all(), (where, float((error / cell).max()))


@pytest.mark.parametrize("name", ["llava_onevision", "llava_next"])
def test_base_and_tiles_are_the_processors(loaded, name):
    """NeXT's tiles too: OneVision's are NeXT's, then shrunk."""
    model = loaded(name, dispatch=False)
    config, shrunk = model._module.config, 0
    for width, height in SIZES:
        picture = ramp(width, height)
        (geometry,) = model.vision.geometry("<image>", [picture])
        encoding = model.processor(text="<image>", images=[picture], return_tensors="pt")
        per_crop = cells(model, encoding["pixel_values"][0])
        base, tiles = geometry.grids
        check(base, per_crop[0].reshape(3, -1), (width, height, "base"))
        rows, columns = get_anyres_image_grid_shape(encoding["image_sizes"][0], config.image_grid_pinpoints, config.vision_config.image_size)
        side = per_crop.shape[-1]
        canvas = per_crop[1 : 1 + rows * columns].reshape(rows, columns, 3, side, side).permute(2, 0, 3, 1, 4)
        kept = unpad_image(canvas.reshape(3, rows * side, columns * side), encoding["image_sizes"][0])
        grid = tiles.boxes.reshape(tiles.rows, tiles.columns, 4)[:, :-1]  # the last column: newlines
        if kept.shape[1:] == grid.shape[:2]:
            check(type(tiles)(tiles.rows, tiles.columns - 1, grid.reshape(-1, 4)), kept.reshape(3, -1), (width, height, "tiles"))
            continue
        shrunk += 1
        full = side * side * model.vision.patch_size**2 / side**2  # a patch's pixels
        centre = torch.stack([kept[0] / kept[2].clamp(min=1), kept[1] / kept[2].clamp(min=1), (kept[2] == full).double()])
        small = torch.nn.functional.interpolate(centre[None], list(grid.shape[:2]), mode="bilinear")[0]
        inside = (small[2] == 1).reshape(-1)  # every source token it mixes is wholly seen
        assert inside.sum() > inside.numel() // 3, (width, height)
        boxes = grid.reshape(-1, 4)[inside]
        cell = (boxes[:, 2:] - boxes[:, :2]).max(0).values
        error = (small[:2].reshape(2, -1)[:, inside].T + 0.5 - (boxes[:, :2] + boxes[:, 2:]) / 2).abs()
        assert (error <= 0.05 * cell + 0.5).all(), (width, height, "shrunk", float((error / cell).max()))
    assert shrunk >= 5 if name == "llava_onevision" else shrunk == 0, shrunk


def test_images_of_one_prompts_list_are_padded_squares(loaded):
    """Among several images of one prompt, each is centred on a square of the processor's
    padding (pad first, resize after: a token's pixels blend at the image's edge, so
    tokens partly seen are left out here; those wholly on the padding have no box)."""
    model = loaded("llava_onevision", dispatch=False)
    pictures = [ramp(*size) for size in ((112, 84), (40, 90), (50, 90), (200, 90), (61, 61))]
    geometry = model.vision.geometry(["<image>" * len(pictures)], [pictures])
    pixels = model.processor(text=["<image>" * len(pictures)], images=[pictures], return_tensors="pt")["pixel_values"]
    checked = empty = 0
    for one, crop in zip(geometry, cells(model, pixels[:, 0])):
        base, newline = one.grids
        assert newline.tokens == 1 and not newline.covered.any()
        sums = crop.reshape(3, -1)
        full = sums[2] == model.vision.patch_size**2
        nothing = sums[2] == 0
        assert not base.covered[nothing].any() and base.covered[full].all()
        checked, empty = checked + int(full.sum()), empty + int(nothing.sum())
        if not full.any():  # 40 x 90: its two middle columns of patches blend with the padding
            continue
        boxes = base.boxes[full]
        error = ((sums[:2, full] / sums[2, full]).T + 0.5 - (boxes[:, :2] + boxes[:, 2:]) / 2).abs()
        cell = (boxes[:, 2:] - boxes[:, :2]).max(0).values
        assert (error <= 0.05 * cell + 0.5).all(), (one.size, float((error / cell).max()))
    assert checked > 20 and empty > 8


#: Pixtral-12B's patch side, in pixels of the processor's canvas.
PIXTRAL_PATCH = 16
#: (width, height): squares, strips, odd sides, smaller than a patch, past the longest edge.
PIXTRAL_SIZES = ((1, 1), (7, 9), (16, 16), (17, 15), (50, 30), (64, 48), (48, 64), (65, 64), (100, 3), (3, 100),
                 (200, 120), (333, 250))


@pytest.fixture(scope="module")
def pixtral():
    pytest.importorskip("vlreg_mistral3", reason="vlreg-mistral3 serves the Pixtral tower and its layout")
    return load("llava_pixtral")


def test_an_image_is_its_grid_rows_each_ended_by_a_break(pixtral):
    ids = pixtral.processor.image_break_token_id, pixtral.processor.image_end_token_id
    for size in PIXTRAL_SIZES:
        encoding = pixtral.processor(text=chat(pixtral), images=[image(*size)], return_tensors="pt")
        (geometry,) = pixtral.vision.geometry(chat(pixtral), [image(*size)])
        (grid,) = geometry.grids
        assert grid.fold == 1 and grid.covered.all(), size
        rows = geometry.positions.reshape(grid.rows, grid.columns)
        assert (rows[:, 1:] - rows[:, :-1] == 1).all(), size
        after = encoding["input_ids"][0, rows[:, -1] + 1].tolist()
        assert after == [ids[0]] * (grid.rows - 1) + [ids[1]], size
        height, width = encoding["image_sizes"][0].tolist()
        assert (grid.rows * PIXTRAL_PATCH, grid.columns * PIXTRAL_PATCH) == (height, width), size


def test_a_token_box_covers_the_pixels_of_its_cell(pixtral):
    for size in PIXTRAL_SIZES:
        (geometry,) = pixtral.vision.geometry(chat(pixtral), [image(*size)])
        (grid,) = geometry.grids
        assert torch.allclose(grid.boxes[-1, 2:], torch.tensor(size, dtype=torch.float64)), size
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
            pixels = pixtral.processor(text=chat(pixtral), images=[probe], return_tensors="pt")["pixel_values"][0, 0]
            y, x = divmod(int(pixels.argmax()), pixels.shape[1])
            assert (y // PIXTRAL_PATCH, x // PIXTRAL_PATCH) == divmod(token, grid.columns), (size, token)


def _inverted(picture: Image.Image, box: list[float]) -> Image.Image:
    pixels = torch.from_numpy(np.array(picture))
    x0, y0, x1, y1 = map(int, box)
    pixels[y0:y1, x0:x1] = 255 - pixels[y0:y1, x0:x1]
    return Image.fromarray(pixels.numpy())


def test_a_token_box_is_exactly_its_patch_and_the_patch_its_token(pixtral):
    """Sides in whole patches within the longest edge: the processor only rescales and
    normalises, so a box's pixels are its patch's exactly."""
    pictures = [image(64, 48), image(32, 64, seed=1)]
    prompt = chat(pixtral, images=2)
    geometries = pixtral.vision.geometry(prompt, pictures)
    with pixtral.trace(prompt, images=pictures):
        clean_patches = pixtral.vision.patch_embeddings.save()
        clean = pixtral.vision.image_features.save()
    start = 0
    for geometry in geometries:
        (grid,) = geometry.grids
        for token in range(grid.tokens):
            edited = list(pictures)
            edited[geometry.index] = _inverted(pictures[geometry.index], grid.boxes[token].tolist())
            with pixtral.trace(prompt, images=edited):
                patches = pixtral.vision.patch_embeddings.save()
            moved = (patches != clean_patches).any(-1).flatten().nonzero().flatten().tolist()
            assert moved == [start + token], (geometry.index, token)
            with pixtral.trace(prompt, images=pictures):
                pixtral.vision.layers[-1].layer_output[0, start + token] += 1
                features = pixtral.vision.image_features.save()
            moved = (features != clean).any(-1).nonzero().flatten().tolist()
            assert moved == [geometry.offset + token], (geometry.index, token)
        start += grid.tokens


def test_a_strategy_that_drops_a_patch_is_refused_with_the_reason():
    pytest.importorskip("vlreg_mistral3", reason="vlreg-mistral3 serves the Pixtral tower and its layout")
    model = load("llava_pixtral", {"vision_feature_select_strategy": "default"})
    with pytest.raises(Unavailable, match="drops the first patch"):
        model.vision.geometry(chat(model), [image(64, 48)])
