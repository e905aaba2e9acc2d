"""What Kimi K2.5 adds: its tower's raster-ordered patches gathered 2 x 2 into tokens,
learned positions added after the patch embedding, and the processor's shrink and padding
undone by the geometry."""

import pytest
import torch

from vlreg.plugin import adapter
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit_pixels_land_in_raster_blocks

#: 112 x 84 fits (4 x 3 tokens); 300 x 100 is padded below (its last row of tokens half over
#: the padding); 400 x 300 is shrunk to the budget of 144 patches.
SIZES = ((112, 84), (300, 100), (400, 300))


@pytest.fixture(scope="module")
def model():
    return load("kimi_k25")


def test_a_lit_pixel_lands_in_the_patches_of_the_token_whose_box_holds_it(model):
    """The processor's patches run row by row over the padded image; each token is a 2 x 2
    block of them. A white pixel at a token's box's centre lands in one of its four patches."""
    lit_pixels_land_in_raster_blocks(model, SIZES)


def test_the_projector_reads_the_tower_output_four_patches_a_token(model):
    """``to_scatter_order`` puts the tower's raster rows in the tokens' order, four patches a
    token: what the projector receives is ``tower_output`` so regrouped."""
    prompt, pictures = chat(model, images=2), [image(112, 84), image(56, 112, seed=1)]
    grid = model.processor(text=prompt, images=pictures, return_tensors="pt")["image_grid_thw"]
    with model.trace(prompt, images=pictures):
        out = model.vision.tower_output.save()
        received = model.projector.input.save()
    regrouped = model.vision.to_scatter_order(out, grid, dim=0)
    assert torch.equal(received, regrouped.view(received.shape))


def test_block_0_receives_the_patch_embeddings_plus_the_resampled_positions(model):
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        first = model.vision.layers[0].input.save()
    assert patches.shape == positions.shape == (1, first.shape[0], model.vision.vision_hidden_size)
    assert torch.equal(first, (patches + positions)[0])
    with model.trace(prompt, images=pictures):
        model.vision.position_embeddings[:] = 0
        unplaced = model.vision.layers[0].input.save()
    assert torch.equal(unplaced, patches[0])


def test_the_tower_is_published_as_the_kimi_vit_adapter(model):
    """What a family on Kimi's blocks builds on (`vlreg.plugin.adapter("kimi_vit")`) is what
    serves Kimi K2.5's own tower."""
    kimi_vit = adapter("kimi_vit")
    assert type(model.vision) is kimi_vit.Vision and type(model.vision.layers[0].self_attn) is kimi_vit.Attention
    assert kimi_vit.tower_rename["attn"] == "self_attn" and kimi_vit.image_grids is model.family.image_grids
