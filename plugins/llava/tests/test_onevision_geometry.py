"""LLaVA-OneVision's (and LLaVA-NeXT's) declared grids against the image processor's own
tiling, on 60 image sizes, and OneVision's padded single crop for images given as a list
per prompt.

Each image is a ramp: a pixel's red value is its column, its green value its row, its
blue value 255 (the processor's padding is darker). The resizes reproduce a ramp (up to
rounding and clamping at the edges), so over the image pixels a token's patch holds, the
mean red and green, once the normalisation is undone, is the centre of what the token
sees in the original image. Tiles are laid side by side and unpadded with transformers'
own ``unpad_image``; where the model shrinks the grid, the centres are shrunk with the
model's bilinear interpolation (which maps a ramp to a ramp), over fully seen tokens.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.llava_onevision.modeling_llava_onevision import get_anyres_image_grid_shape, unpad_image

from vlreg import StandardizedTransformer
from vlreg.testing import build

SIZES = [(w, h) for w in (15, 40, 56, 77, 100, 112, 150, 168, 201, 255) for h in (19, 56, 84, 121, 170, 240)]


@pytest.fixture(scope="module")
def loaded():
    cache: dict[str, StandardizedTransformer] = {}

    def get(name: str) -> StandardizedTransformer:
        if name not in cache:  # lazy: only the processor runs
            cache[name] = StandardizedTransformer(str(build(name)), task="image-text-to-text", dispatch=False)
        return cache[name]

    return get


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
    model = loaded(name)
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
    model = loaded("llava_onevision")
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
