"""Where a LLaVA-over-Pixtral (Pixtral-12B's layout) image token lies, checked against the
processor and the model. The tower and its layout are vlreg-mistral3's (the adapter
``"pixtral_image_grids"``); LLaVA's projector maps each 16-pixel patch to one token.

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

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build
from vlreg.testing.conformance import image, lit

pytest.importorskip("vlreg_mistral3", reason="vlreg-mistral3 serves the Pixtral tower and its layout")

PATCH = 16
#: (width, height): squares, strips, odd sides, smaller than a patch, past the longest edge.
SIZES = ((1, 1), (7, 9), (16, 16), (17, 15), (50, 30), (64, 48), (48, 64), (65, 64), (100, 3), (3, 100),
         (200, 120), (333, 250))


@pytest.fixture(scope="module")
def model():
    return StandardizedTransformer(str(build("llava_pixtral")), task="image-text-to-text", dispatch=True, device="cpu")


def chat(model, images: int = 1) -> str:
    content = [{"type": "image"}] * images + [{"type": "text", "text": "What is in this image?"}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)


def test_an_image_is_its_grid_rows_each_ended_by_a_break(model):
    ids = model.processor.image_break_token_id, model.processor.image_end_token_id
    for size in SIZES:
        encoding = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        assert grid.fold == 1 and grid.covered.all(), size
        rows = geometry.positions.reshape(grid.rows, grid.columns)
        assert (rows[:, 1:] - rows[:, :-1] == 1).all(), size
        after = encoding["input_ids"][0, rows[:, -1] + 1].tolist()
        assert after == [ids[0]] * (grid.rows - 1) + [ids[1]], size
        height, width = encoding["image_sizes"][0].tolist()
        assert (grid.rows * PATCH, grid.columns * PATCH) == (height, width), size



def test_a_token_box_covers_the_pixels_of_its_cell(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        assert torch.allclose(grid.boxes[-1, 2:], torch.tensor(size, dtype=torch.float64)), size
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
            pixels = model.processor(text=chat(model), images=[probe], return_tensors="pt")["pixel_values"][0, 0]
            y, x = divmod(int(pixels.argmax()), pixels.shape[1])
            assert (y // PATCH, x // PATCH) == divmod(token, grid.columns), (size, token)


def _inverted(picture: Image.Image, box: list[float]) -> Image.Image:
    pixels = torch.from_numpy(np.array(picture))
    x0, y0, x1, y1 = map(int, box)
    pixels[y0:y1, x0:x1] = 255 - pixels[y0:y1, x0:x1]
    return Image.fromarray(pixels.numpy())


def test_a_token_box_is_exactly_its_patch_and_the_patch_its_token(model):
    """Sides in whole patches within the longest edge: the processor only rescales and
    normalises, so a box's pixels are its patch's exactly."""
    pictures = [image(64, 48), image(32, 64, seed=1)]
    prompt = chat(model, 2)
    geometries = model.vision.geometry(prompt, pictures)
    with model.trace(prompt, images=pictures):
        clean_patches = model.vision.patch_embeddings.save()
        clean = model.vision.image_features.save()
    start = 0
    for geometry in geometries:
        (grid,) = geometry.grids
        for token in range(grid.tokens):
            edited = list(pictures)
            edited[geometry.index] = _inverted(pictures[geometry.index], grid.boxes[token].tolist())
            with model.trace(prompt, images=edited):
                patches = model.vision.patch_embeddings.save()
            moved = (patches != clean_patches).any(-1).flatten().nonzero().flatten().tolist()
            assert moved == [start + token], (geometry.index, token)
            with model.trace(prompt, images=pictures):
                model.vision.layers[-1].layer_output[0, start + token] += 1
                features = model.vision.image_features.save()
            moved = (features != clean).any(-1).nonzero().flatten().tolist()
            assert moved == [geometry.offset + token], (geometry.index, token)
        start += grid.tokens


def test_a_strategy_that_drops_a_patch_is_refused_with_the_reason():
    model = StandardizedTransformer(str(build("llava_pixtral", vision_feature_select_strategy="default")),
                                    task="image-text-to-text", dispatch=True, device="cpu")
    with pytest.raises(Unavailable, match="drops the first patch"):
        model.vision.geometry(chat(model), [image(64, 48)])
