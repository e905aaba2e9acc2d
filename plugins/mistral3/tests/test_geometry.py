"""Where a Mistral 3 image token lies, checked against the processor and the model.

* the grid is the image's ``[IMG]`` tokens, each row of them followed by ``[IMG_BREAK]``
  (``[IMG_END]`` after the last), on images of many shapes;
* each token's box is over the pixels the processor puts in that token's cell: a probe
  lit at the box's centre is brightest inside the token's 16 x 16 cell of the canvas;
* each token is exactly its 2 x 2 block of the tower's packed row of patches: changing
  those patches (and no other) changes that token's features (and no other), for every
  token of two images of different shapes.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import centres, image, lit, moved_features, patch_block, taken_sizes

CHECKPOINT = "mistral3"

#: (width, height): squares, strips, odd sides, smaller than a token, past the longest edge
#: (a side the resize would take to 0 pixels the processor itself refuses).
SIZES = ((1, 1), (7, 9), (16, 16), (17, 15), (31, 33), (48, 64), (64, 48), (64, 64), (65, 64), (100, 3),
         (3, 100), (112, 84), (84, 112), (128, 32), (200, 200), (333, 250), (250, 333), (90, 91), (40, 5), (5, 40))


def test_an_image_is_its_grid_rows_each_ended_by_a_break(model):
    ids = model.processor.image_break_token_id, model.processor.image_end_token_id
    for size in taken_sizes(model, chat(model), SIZES):
        encoding = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        assert grid.fold == 2 and grid.covered.all(), size
        rows = geometry.positions.reshape(grid.rows, grid.columns)
        assert (rows[:, 1:] - rows[:, :-1] == 1).all(), size  # a row's tokens are consecutive
        after = encoding["input_ids"][0, rows[:, -1] + 1].tolist()
        assert after == [ids[0]] * (grid.rows - 1) + [ids[1]], size
        height, width = encoding["image_sizes"][0].tolist()
        assert (grid.rows * 16, grid.columns * 16) == (height, width), size


def test_a_token_box_covers_the_pixels_of_its_cell(model):
    for size in taken_sizes(model, chat(model), SIZES):
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        assert torch.allclose(grid.boxes[-1, 2:], torch.tensor(size, dtype=torch.float64)), size
        for _, _, token, x, y in centres(geometry):
            pixels = model.processor(text=chat(model), images=[lit(*size, x, y)], return_tensors="pt")["pixel_values"][0, 0]
            row, column = divmod(int(pixels.argmax()), pixels.shape[1])
            assert (row // 16, column // 16) == divmod(token, grid.columns), (size, token)


def test_a_token_is_its_block_of_the_packed_patches(model):
    """Every token of two images: its features move when, and only when, its 2 x 2 block
    of patches in the row the tower packs (image after image, raster order) changes."""
    pictures = [image(112, 84), image(64, 128, seed=1)]
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, pictures)
    with model.trace(prompt, images=pictures):
        clean = model.vision.image_features.save()
    start = 0
    for geometry in geometries:
        (grid,) = geometry.grids
        for token in range(grid.tokens):
            moved = moved_features(model, prompt, pictures, 0, patch_block(grid, token, first=start), clean)
            assert moved == [geometry.offset + token], (geometry.index, token)
        start += grid.tokens * grid.fold**2
