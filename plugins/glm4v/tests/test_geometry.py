"""Where a GLM-V image token lies, checked against the processor and the model.

GLM's image processor resizes an image whole to sides that are multiples of 28 pixels and
cuts it into 14-pixel patches in merge-block order; the tower's downsampling convolution
maps each 2 x 2 block of patches to one token, blocks in raster order. So a token's box is
its 28 x 28 square of the resized image scaled back to the original, and:

* the grids count the image's tokens (the prompt's image placeholders, and the mask a
  trace reads);
* GLM-5-Next's processor pads instead (`vlreg_glm4v.geometry`): its tokens over the padding
  cover nothing;
* a probe lit at a token's box centre is brightest in that token's four patches of the
  pixels the processor hands the tower.
"""

from __future__ import annotations

import math

from vlreg.testing import chat
from vlreg.testing.conformance import image, lit

CHECKPOINTS = ("glm4v", "glmga", "glm5_next")

#: (width, height): the tiny processor's bounds and either side of them, odd sides, strips.
SIZES = ((112, 84), (56, 112), (57, 85), (168, 168), (30, 30), (200, 40), (40, 200), (400, 300))


def test_the_grids_count_the_image_tokens(model):
    image_token = model._module.config.image_token_id
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        ids = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")["input_ids"]
        (grid,) = geometry.grids
        assert grid.tokens == int((ids == image_token).sum()) > 0, size
    pictures = [image(112, 84), image(56, 112, seed=1)]
    geometries = model.vision.geometry(chat(model, images=2), pictures)
    with model.trace(chat(model, images=2), images=pictures):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
    counts = [geometry.grids[0].tokens for geometry in geometries]
    assert counts == [12, 8] and int(mask.sum()) == features.shape[0] == sum(counts)


def test_a_lit_pixel_lands_in_the_token_whose_box_holds_it(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        (grid,) = geometry.grids
        for token in range(grid.tokens):
            x0, y0, x1, y1 = grid.boxes[token].tolist()
            if math.isnan(x0):  # over GLM-5-Next's padding: it covers nothing of the image
                continue
            # only a token cut by the image's edge (GLM-5-Next pads rather than stretches) may be a sliver
            assert (x1 - x0 >= 2 or x1 == size[0]) and (y1 - y0 >= 2 or y1 == size[1]), size
            probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
            pixels = model.processor(text=chat(model), images=[probe], return_tensors="pt")["pixel_values"]
            patch = int(pixels.argmax()) // pixels.shape[-1]
            assert patch // 4 == token, (size, token)


def test_each_token_is_its_block_of_tower_rows(model):
    """The downsampling convolution reads each token's 2 x 2 block of the tower's output
    alone: zeroing one token's four rows of ``tower_output`` changes that token's features
    and no other's."""
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        plain = model.vision.image_features.save()
    for token in (0, 5, 11):
        with model.trace(prompt, images=pictures):
            model.vision.tower_output[0, 4 * token : 4 * token + 4] = 0
            edited = model.vision.image_features.save()
        changed = (edited != plain).any(-1)
        assert changed.nonzero().flatten().tolist() == [token]
