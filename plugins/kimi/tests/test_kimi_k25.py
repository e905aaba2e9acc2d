"""What Kimi K2.5 adds: its tower's raster-ordered patches gathered 2 x 2 into tokens,
learned positions added after the patch embedding, and the processor's shrink and padding
undone by the geometry."""

import pytest
import torch
from PIL import Image

from vlreg.plugin import adapter
from vlreg.testing import chat, load
from vlreg.testing.conformance import image, lit, lit_pixels_land_in_raster_blocks

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



def test_a_lit_pixel_in_a_kept_frame_lands_in_its_chunk_in_the_token_whose_box_holds_it(model):
    """Sampled at 12 of 24 frames a second, the processor keeps every other frame, chunks them
    4 at a time and pads each as an image: each grid covers its chunk's first to last kept
    frame, written at its first frame's time, and a white pixel at a token's box's centre in
    one of those frames lands in that frame's patches of that chunk, in one of the token's four."""
    sampled = {"do_sample_frames": True, "fps": 12, "video_metadata": [{"fps": 24, "total_num_frames": 10}]}
    width, height, merge = 100, 60, 2  # padded to 112 x 84: the last column of tokens part over padding
    prompt = chat(model, "video", text=None)
    (geometry,) = model.vision.geometry(prompt, videos=[[image(width, height)] * 10], **sampled)
    assert [grid.frames for grid in geometry.grids] == [(0, 6), (8, 8)]
    assert [grid.seconds for grid in geometry.grids] == pytest.approx([0, 8 / 24], abs=1e-3)
    chunk = model.processor.video_processor.temporal_patch_size
    for index, grid in enumerate(geometry.grids):
        for frame in sorted(set(grid.frames)):
            for token in range(0, grid.tokens, 3):
                x0, y0, x1, y1 = grid.boxes[token].tolist()
                shot = lit(width, height, (x0 + x1) / 2, (y0 + y1) / 2)
                video = [shot if k == frame else Image.new("RGB", (width, height)) for k in range(10)]
                encoding = model.processor(text=prompt, videos=[video], return_tensors="pt", **sampled)
                _, rows, columns = encoding["video_grid_thw"][0].tolist()
                patch = int(encoding["pixel_values_videos"].flatten(1).amax(-1).argmax())
                kept, (row, column) = patch // (rows * columns), divmod(patch % (rows * columns), columns)
                assert frame == 2 * kept and kept // chunk == index  # the kept frame's patches, in this chunk
                assert (row // merge) * grid.columns + column // merge == token


def test_a_chunk_a_frame_is_served_on_every_transformers(model):
    """``temporal_patch_size=1`` (what the refusal before transformers 5.25 offers) makes each
    frame its own chunk and grid: the trace serves each frame's tokens, where the geometry
    places them."""
    prompt, video = chat(model, "video", text=None), [image(56, 56, seed=k) for k in range(3)]
    (geometry,) = model.vision.geometry(prompt, videos=[video], temporal_patch_size=1)
    with model.trace(prompt, videos=[video], temporal_patch_size=1):
        mask = model.vision.video_token_mask.save()
        features = model.vision.video_features.save()
    assert [grid.frames for grid in geometry.grids] == [(0, 0), (1, 1), (2, 2)]
    assert features.shape[0] == int(mask.sum()) == geometry.tokens == 3 * 2 * 2  # 56 pixels: 2 x 2 tokens a frame
