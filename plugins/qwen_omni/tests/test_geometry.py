"""Where an omni thinker's image token lies: the Qwen image processor resizes each image
whole into 2 x 2 blocks of patches (14 pixels on Qwen2.5-Omni, 16 on Qwen3-Omni), a token
per block in raster order, so the grids count the image's tokens and a probe lit at a
token's box centre is brightest in that token's four patches of the pixels the processor
hands the tower."""

from __future__ import annotations


from vlreg.testing import chat
from vlreg.testing.conformance import centres, image, lit

CHECKPOINTS = ("qwen2_5_omni_thinker", "qwen3_omni_moe_thinker")

SIZES = ((112, 84), (56, 112), (57, 85), (200, 40), (30, 30), (400, 300))


def test_the_grids_count_the_image_tokens(model):
    image_token = model._module.config.image_token_id
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        ids = model.processor(text=chat(model), images=[image(*size)], return_tensors="pt")["input_ids"]
        assert geometry.grids[0].tokens == int((ids == image_token).sum()) > 0, size
    pictures = [image(112, 84), image(56, 112, seed=1)]
    geometries = model.vision.geometry(chat(model, images=2), pictures)
    with model.trace(chat(model, images=2), images=pictures):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
    assert int(mask.sum()) == features.shape[0] == sum(geometry.grids[0].tokens for geometry in geometries)


def test_a_lit_pixel_lands_in_the_token_whose_box_holds_it(model):
    for size in SIZES:
        (geometry,) = model.vision.geometry(chat(model), [image(*size)])
        assert len(geometry.grids) == 1, size
        for _, _, token, x, y in centres(geometry):
            pixels = model.processor(text=chat(model), images=[lit(*size, x, y)], return_tensors="pt")["pixel_values"]
            assert int(pixels.argmax()) // pixels.shape[-1] // 4 == token, (size, token)
