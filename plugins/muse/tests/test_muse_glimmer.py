"""What Muse Glimmer adds: its tower's rows in windows between two raster orders, learned
positions added before a norm, the processor's stretch undone by the geometry, and a readout
that multiplies the logits before capping them."""

import pytest
import torch

from vlreg.analysis import project_on_vocab
from vlreg.plugin import adapter
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit_pixels_land_in_raster_blocks

#: 112 x 84 is 4 x 3 tokens as it is; 300 x 100 is stretched to 6 x 2; 400 x 300 shrunk to 4 x 3.
SIZES = ((112, 84), (300, 100), (400, 300))


@pytest.fixture(scope="module")
def model():
    return load("muse_glimmer")


def test_a_lit_pixel_lands_in_the_patches_of_the_token_whose_box_holds_it(model):
    """The processor stretches the image to whole tokens and cuts patches row by row; each
    token is a 2 x 2 square of them. A white pixel at a token's box's centre lands in one of
    its four patches."""
    lit_pixels_land_in_raster_blocks(model, SIZES)


def test_the_blocks_run_in_windows_and_to_scatter_order_undoes_them(model):
    """The tower's blocks hold the rows window by window; ``tower_output`` is back in raster
    order; ``to_scatter_order`` puts a block's rows in the tokens' order, which is how the
    pixel shuffle groups ``tower_output`` for the projector."""
    prompt, pictures = chat(model, images=2), [image(112, 84), image(300, 100, seed=1)]
    grid = model.processor(text=prompt, images=pictures, return_tensors="pt")["image_grid_thw"]
    cuts = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(prompt, images=pictures):
        for block in model.vision.layers:
            cuts.append(block.self_attn.inputs[1]["cu_seqlens"].save())
        last = model.vision.layers[-1].layer_output.save()
        out = model.vision.tower_output.save()
        received = model.projector.input.save()
    sizes = grid.prod(-1)
    assert cuts[1].tolist() == [0, *sizes.cumsum(0).tolist()]  # a full block: each image whole
    assert len(cuts[0]) == 1 + int(sizes.sum()) // 4 and (cuts[0].diff() == 4).all()  # windowed: 2 x 2 patches
    ln_post = model.vision.ln_post._module
    tokens = model.vision.to_scatter_order(ln_post(last[0]), grid, dim=0).view(-1, 4, out.shape[-1])
    assert torch.equal(received, tokens.transpose(1, 2).reshape(received.shape))
    assert not torch.equal(ln_post(last[0]), out[0])  # the blocks' order is not tower_output's


def test_the_positions_are_added_to_the_patches_before_ln_pre(model):
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        patches = model.vision.patch_embeddings.save()
        positions = model.vision.position_embeddings.save()
        normed = model.vision.ln_pre.input.save()
    torch.testing.assert_close(normed, (patches + positions)[0])
    with model.trace(prompt, images=pictures):
        model.vision.position_embeddings[:] = 0
        unplaced = model.vision.ln_pre.input.save()
    torch.testing.assert_close(unplaced, patches[0])


def test_the_readout_multiplies_then_caps(model):
    """``logits`` is what the model returns: ``lm_head``'s output times ``output_multiplier``,
    then soft-capped; the logit lens of the last block applies the same."""
    config = model._module.config.get_text_config()
    assert config.output_multiplier != 1
    with model.trace(chat(model), images=[image(112, 84)]):
        last = model.layers[-1].layer_output.save()
        raw = model.uncapped_logits.save()
        logits = model.logits.save()
    cap = config.final_logit_softcapping
    torch.testing.assert_close(logits, torch.tanh(raw * config.output_multiplier / cap) * cap)
    torch.testing.assert_close(project_on_vocab(model, last), logits)


def test_the_tower_blocks_are_kimis(model):
    assert type(model.vision.layers[0].self_attn) is adapter("kimi_vit").Attention
