"""Where a Llama 4 image token lies, checked against the processor and the model.

* an image's grids are the tiles the processor cuts, in the order its separators
  write them, then the global image where there are several tiles;
* each token's box is over the pixels the processor puts in that token's cell: a probe
  lit at the box's centre (a box at least 2 pixels wide and high) is brightest inside that
  token's 16 x 16 cell of its tile (or of the global image), and a token's box is NaN
  exactly where its cell is all padding;
* each token is exactly its 2 x 2 block of its tile's patches: changing those patches
  (and no other) changes that token's features (and no other), for every token.
"""

from __future__ import annotations

import torch
from PIL import Image

from vlreg.testing import chat
from vlreg.testing.conformance import centres, image, lit, moved_features, patch_block

CHECKPOINT = "llama4"
LOAD_OPTIONS = {"dtype": torch.bfloat16}

#: (width, height): one tile, 2 x 2, strips of 4 tiles, odd sides, smaller than a tile.
SIZES = ((32, 32), (16, 16), (112, 84), (84, 112), (10, 200), (200, 10), (64, 33), (33, 64), (300, 300), (1, 1),
         (45, 90), (90, 45), (100, 7), (64, 64), (65, 65), (31, 97))


def test_grids_are_the_tiles_the_separators_write_then_the_global_image(model):
    tokens = model.tokenizer.convert_tokens_to_ids
    for size in SIZES:
        ids = model.processor(text=chat(model), images=[image(*size)])["input_ids"][0]
        rows = ids.count(tokens("<|tile_y_separator|>"))
        columns = ids.count(tokens("<|tile_x_separator|>")) // rows + 1 if rows else 1
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        labels = [grid.label for grid in geometry.grids]
        if rows:
            assert labels == [f"tile {r},{c}" for r in range(rows) for c in range(columns)] + ["global"], size
        else:
            assert labels == ["image"], size
        assert all((grid.rows, grid.columns, grid.fold) == (2, 2, 2) for grid in geometry.grids)


def test_a_token_box_covers_the_pixels_of_its_cell(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        for index, grid, token, x, y in centres(geometry, smallest=2):  # a pixel's probe singles out no less
            if not grid.covered[token]:
                continue  # no pixel of the image
            tiles = model.processor(text=chat(model), images=[lit(*size, x, y)], return_tensors="pt")["pixel_values"][:, 0]
            row, column = divmod(int(tiles[index].float().argmax()), tiles.shape[-1])
            assert (row // 16, column // 16) == divmod(token, grid.columns), (size, grid.label, token)
        # the tiles' tokens over the padding alone: their cells of the canvas are black
        tiles = model.processor(text=chat(model), images=[Image.new("RGB", size, "white")], return_tensors="pt")["pixel_values"]
        for index, grid in enumerate(geometry.grids):
            for token in range(grid.tokens):
                r, c = divmod(token, grid.columns)
                cell = tiles[index, 0, r * 16 : (r + 1) * 16, c * 16 : (c + 1) * 16].float()
                assert bool(grid.covered[token]) == bool(cell.max() > 0), (size, grid.label, token)


def test_a_token_is_its_block_of_its_tiles_patches(model):
    pictures = [image(112, 84)]
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, pictures)
    with model.trace(prompt, images=pictures):
        clean = model.vision.image_features.save()
    offset = 0
    for tile, grid in enumerate(geometry.grids):
        for token in range(grid.tokens):  # the tile's patches in raster order (the class token follows them)
            moved = moved_features(model, prompt, pictures, tile, patch_block(grid, token), clean)
            assert moved == [offset + token], (grid.label, token)
        offset += grid.tokens

