"""What Muse Glimmer adds: its tower's rows in windows between two raster orders, learned
positions added before a norm, the processor's stretch undone by the geometry, and a readout
that multiplies the logits before capping them."""

import pytest
import torch
from PIL import Image

from vlreg.analysis import project_on_vocab
from vlreg.plugin import adapter
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit, lit_pixels_land_in_raster_blocks

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


def test_a_lit_pixel_in_a_kept_frame_lands_in_its_temporal_patch_in_the_token_whose_box_holds_it(model):
    """At its 2 frames a second of a 4-a-second video, the processor keeps 4 of 10 frames
    (evenly: 0, 3, 6, 9), folds them 2 at a time and stretches each as an image: each grid
    covers its patch's two kept frames, written at the first's time, and a white pixel at a
    token's box's centre in one of them lands in that frame's half of one of the token's four
    patches, in that temporal patch."""
    sampled = {"return_metadata": True, "video_metadata": [{"fps": 4, "total_num_frames": 10}]}
    width, height, merge = 100, 60, 2  # stretched to 84 x 56: 3 x 2 tokens
    prompt = chat(model, "video", text=None)
    (geometry,) = model.vision.geometry(prompt, videos=[[image(width, height)] * 10], **sampled)
    assert [grid.frames for grid in geometry.grids] == [(0, 3), (6, 9)]
    assert [grid.seconds for grid in geometry.grids] == [0, 6 / 4]
    fold = model.processor.video_processor.temporal_patch_size
    for index, grid in enumerate(geometry.grids):
        for frame in grid.frames:
            for token in range(0, grid.tokens, 2):
                x0, y0, x1, y1 = grid.boxes[token].tolist()
                shot = lit(width, height, (x0 + x1) / 2, (y0 + y1) / 2)
                video = [shot if k == frame else Image.new("RGB", (width, height)) for k in range(10)]
                encoding = model.processor(text=prompt, videos=[video], return_tensors="pt", **sampled)
                _, rows, columns = encoding["video_grid_thw"][0].tolist()
                pixels = encoding["pixel_values_videos"]  # a row a patch: its frames one after the other
                at, half = divmod(int(pixels.argmax()), pixels.shape[1])
                patch, (row, column) = at // (rows * columns), divmod(at % (rows * columns), columns)
                assert patch == index and frame == grid.frames[half // (pixels.shape[1] // fold)]
                assert (row // merge) * grid.columns + column // merge == token
