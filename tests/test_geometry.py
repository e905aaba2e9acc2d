"""`vision.geometry` on every built-in family: each image's run of tokens, its grids and
the pixel box each token covers, checked against the mask, the features and the pixels
the processor hands the tower."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat, shared_checkpoint
from vlreg.testing.conformance import image

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "llava_interleave", "llava_1_5", "llava_next")
SIZES = ((112, 84), (60, 150))


def pictures() -> list:
    return [image(width, height, seed) for seed, (width, height) in enumerate(SIZES)]


@pytest.mark.parametrize("name", FAMILIES)
def test_each_image_owns_its_run_of_the_mask(loaded, name):
    model = loaded(name)
    images = pictures()
    for alone in images:
        with model.trace(chat(model), images=[alone]):
            mask = model.vision.image_token_mask.save()
        (geometry,) = model.vision.geometry(chat(model), [alone])
        assert geometry.tokens == int(mask.sum()) == sum(grid.tokens for grid in geometry.grids)
        assert torch.equal(geometry.positions, mask[0].nonzero()[:, 0])

    prompt = chat(model, images=2)
    geometry = model.vision.geometry(prompt, images)
    with model.trace(prompt, images=images):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert [g.tokens for g in geometry] == [int(mask.sum()) for mask in _alone_masks(model, images)]
    assert torch.equal(torch.cat([g.positions for g in geometry]), mask[0].nonzero()[:, 0])
    for g in geometry:
        assert g.row == 0 and g.size == images[g.index].size
        assert torch.equal(first[g.row, g.positions], features[g.features])


def _alone_masks(model, images):
    masks = []
    for alone in images:
        with model.trace(chat(model), images=[alone]):
            masks.append(model.vision.image_token_mask.save())
    return masks


def _overlap(boxes: torch.Tensor) -> torch.Tensor:
    """Pairwise intersection areas, the diagonal zeroed."""
    x = (torch.minimum(boxes[:, None, 2], boxes[None, :, 2]) - torch.maximum(boxes[:, None, 0], boxes[None, :, 0])).clamp(min=0)
    y = (torch.minimum(boxes[:, None, 3], boxes[None, :, 3]) - torch.maximum(boxes[:, None, 1], boxes[None, :, 1])).clamp(min=0)
    return (x * y).fill_diagonal_(0)


@pytest.mark.parametrize("name", FAMILIES)
def test_boxes_tile_what_the_tower_sees_without_overlap(loaded, name):
    model = loaded(name)
    for geometry in model.vision.geometry(chat(model, images=2), pictures()):
        width, height = geometry.size
        for grid in geometry.grids:
            boxes = grid.boxes[grid.covered]
            if not len(boxes):
                continue
            assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= width).all() and (boxes[:, 3] <= height).all()
            assert (boxes[:, 2:] > boxes[:, :2]).all()
            assert _overlap(boxes).max() < 1e-9
            left, top = boxes[:, 0].min(), boxes[:, 1].min()
            right, bottom = boxes[:, 2].max(), boxes[:, 3].max()
            area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
            assert torch.isclose(area, (right - left) * (bottom - top)), "the boxes leave a hole"
            if name != "llava_1_5":  # a centre crop sees part of the image; the rest see all of it
                assert torch.allclose(torch.stack([left, top, right, bottom]).float(), torch.tensor([0.0, 0, width, height]))


def _probe(size, box) -> Image.Image:
    """Black, with white on every pixel whose centre is in ``box``."""
    width, height = size
    xs, ys = torch.arange(width) + 0.5, torch.arange(height) + 0.5
    inside = ((xs >= box[0]) & (xs < box[2]))[None, :] & ((ys >= box[1]) & (ys < box[3]))[:, None]
    return Image.fromarray((inside[..., None].expand(-1, -1, 3).to(torch.uint8) * 255).numpy())


def _cells(pixels: torch.Tensor, patch: int) -> torch.Tensor:
    """Mean brightness of each ``patch`` x ``patch`` cell of ``[3, h, w]``, in raster order."""
    channels, height, width = pixels.shape
    return pixels.reshape(channels, height // patch, patch, width // patch, patch).mean((0, 2, 4)).reshape(-1)


def _brightest(model, name, probe, grid_index: int) -> int:
    """Which token of the grid the processor's pixels light up, found with the model's
    own layout: merge blocks (Qwen), the patch grid (LLaVA), NeXT's tiles unpadded by
    transformers' own ``unpad_image``."""
    encoding = model.processor.image_processor(images=[probe], return_tensors="pt")
    pixels = encoding["pixel_values"]
    if name.startswith("qwen"):
        merge = model.vision.spatial_merge_size ** 2
        return int(pixels.reshape(-1, merge, pixels.shape[-1]).mean((1, 2)).argmax())
    patch = model.vision.patch_size
    if name != "llava_next":
        return int(_cells(pixels[0], patch).argmax())
    if grid_index == 0:
        return int(_cells(pixels[0, 0], patch).argmax())
    from transformers.models.llava_next.modeling_llava_next import get_anyres_image_grid_shape, unpad_image

    config = model._module.config
    tiles_h, tiles_w = get_anyres_image_grid_shape(encoding["image_sizes"][0], config.image_grid_pinpoints, config.vision_config.image_size)
    side = config.vision_config.image_size // patch
    cells = torch.stack([_cells(tile, patch).reshape(side, side) for tile in pixels[0, 1 : 1 + tiles_h * tiles_w]])
    canvas = cells.reshape(tiles_h, tiles_w, side, side).permute(0, 2, 1, 3).reshape(tiles_h * side, tiles_w * side)
    kept = unpad_image(canvas[None], encoding["image_sizes"][0])[0]
    with_newlines = torch.cat([kept, torch.full((kept.shape[0], 1), -1.0)], 1)
    return int(with_newlines.reshape(-1).argmax())


@pytest.mark.parametrize("name", FAMILIES)
def test_a_tokens_box_is_the_cell_the_processor_gives_its_token(loaded, name):
    model = loaded(name)
    for original in pictures():
        (geometry,) = model.vision.geometry(chat(model), [original])
        for grid_index, grid in enumerate(geometry.grids):
            covered = grid.covered.nonzero()[:, 0].tolist()
            for token in sorted({covered[0], covered[len(covered) // 3], covered[len(covered) // 2], covered[-1]}):
                probe = _probe(original.size, grid.boxes[token].tolist())
                assert _brightest(model, name, probe, grid_index) == token, (grid.label, token)


@pytest.mark.parametrize("name", ("qwen2_vl", "qwen2_5_vl"))
def test_qwen_tokens_are_28_pixel_squares_of_the_resized_image(loaded, name):
    model = loaded(name)
    images = pictures()
    encoding = model.processor(text=chat(model, images=2), images=images, return_tensors="pt")
    for geometry, (t, h, w) in zip(model.vision.geometry(chat(model, images=2), images), encoding["image_grid_thw"].tolist()):
        (grid,) = geometry.grids
        assert (grid.rows, grid.columns) == (h // 2, w // 2)
        width, height = geometry.size
        resized = grid.boxes * torch.tensor([w * 14 / width, h * 14 / height] * 2, dtype=torch.float64)
        rows, columns = torch.meshgrid(torch.arange(h // 2), torch.arange(w // 2), indexing="ij")
        expected = torch.stack([columns, rows, columns + 1, rows + 1], -1).reshape(-1, 4) * 28
        torch.testing.assert_close(resized, expected.double())


def test_llava_1_5_sees_the_centre_crop_only(loaded):
    model = loaded("llava_1_5")
    (geometry,) = model.vision.geometry(chat(model), [image(112, 84)])
    boxes = geometry.grids[0].boxes
    # shortest edge 84 -> 56 gives 74 x 56; the 56 x 56 crop starts 9 pixels in
    torch.testing.assert_close(boxes[0], torch.tensor([9 * 112 / 74, 0, 23 * 112 / 74, 21], dtype=torch.float64))
    assert abs(boxes[:, 0].min() - (112 - boxes[:, 2].max())) < 112 / 74 + 1e-9


def test_llava_next_newlines_cover_no_pixels(loaded):
    model = loaded("llava_next")
    picture = image(112, 84)
    (geometry,) = model.vision.geometry(chat(model), [picture])
    base, tiles = geometry.grids
    assert (base.label, tiles.label) == ("base", "tiles") and base.covered.all()
    newline = torch.zeros(tiles.rows, tiles.columns, dtype=torch.bool)
    newline[:, -1] = True
    assert torch.equal(~tiles.covered, newline.reshape(-1))
    with model.trace(chat(model), images=[picture]):
        features = model.vision.image_features.save()
    expected = torch.cat([torch.zeros(base.tokens, dtype=torch.bool), newline.reshape(-1)])
    assert torch.equal((features == model._module.model.image_newline.detach()).all(-1), expected)
    assert torch.equal(geometry.boxes.isnan().any(-1), expected)


def test_several_prompts_keep_their_rows(loaded):
    model = loaded("qwen2_vl")
    prompts = [chat(model), chat(model).replace("What is in this image?", "Describe the picture.")]
    images = pictures()
    geometry = model.vision.geometry(prompts, images)
    with model.trace(prompts, images=images):
        mask = model.vision.image_token_mask.save()
    assert [g.row for g in geometry] == [0, 1]
    for g in geometry:
        assert torch.equal(g.positions, mask[g.row].nonzero()[:, 0])


def test_a_text_only_load_has_no_geometry():
    with pytest.warns(UserWarning):
        model = StandardizedTransformer(str(build("llava_interleave")), dispatch=True, device="cpu")
    with pytest.raises(Unavailable, match="no processor"):
        model.vision.geometry("Hello", [image(56, 56)])


def test_token_at_finds_the_box_under_a_pixel(loaded):
    model = loaded("qwen2_vl")
    (geometry,) = model.vision.geometry(chat(model), [image(112, 84)])
    assert geometry.token_at(30, 2) == 1 and geometry.token_at(111, 83) == geometry.tokens - 1
    with pytest.raises(ValueError, match="covers pixel"):
        geometry.token_at(200, 2)


#: checkpoint folder, image size, token grid, a token's side in the tower's pixels, the
#: (width, height) the processor makes of the image
REAL = {
    "qwen2_vl": ("Qwen2-VL-2B-Instruct", (448, 448), (16, 16), 28, (448, 448)),
    "qwen2_5_vl": ("Qwen2.5-VL-7B-Instruct", (640, 480), (17, 23), 28, (644, 476)),
    "llava_interleave": ("llava-interleave-qwen-0.5b-hf", (640, 480), (27, 27), 14, (384, 384)),
}


@pytest.mark.parametrize("name", REAL)
def test_real_processors_geometry(name):
    """Built on the meta device from the real config and processor: no weights are read.
    SigLIP's 14-pixel patches fit 27 times into 384, so its last 6 pixels are seen by no
    token."""
    folder, size, (rows, columns), cell, (width, height) = REAL[name]
    source = shared_checkpoint(folder)
    if source is None:
        pytest.skip(f"../shared/checkpoints/{folder} is absent: the real checkpoints' metadata lives beside the repository")
    model = StandardizedTransformer(str(source), task="image-text-to-text", dispatch=False)
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [image(*size)])
    encoding = model.processor(text=prompt, images=[image(*size)], return_tensors="pt")
    assert geometry.tokens == int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    assert [(g.rows, g.columns) for g in geometry.grids] == [(rows, columns)]
    x, y = size[0] / width, size[1] / height
    last = torch.tensor([(columns - 1) * cell * x, (rows - 1) * cell * y, columns * cell * x, rows * cell * y], dtype=torch.float64)
    torch.testing.assert_close(geometry.boxes[-1], last)


def test_images_a_list_per_prompt_as_the_trace_takes_them(loaded):
    """Several prompts' images as one list per prompt (the form SmolVLM's processor needs)
    give the geometry the flat list gives, image by image in order."""
    model = loaded("qwen2_vl")
    prompts = [chat(model, images=2), chat(model)]
    images = [*pictures(), image(56, 56, seed=3)]
    flat = model.vision.geometry(prompts, images)
    nested = model.vision.geometry(prompts, [images[:2], images[2:]])
    assert [(g.row, g.size, g.positions.tolist(), g.offset) for g in nested] == [
        (g.row, g.size, g.positions.tolist(), g.offset) for g in flat
    ]
    assert [g.row for g in nested] == [0, 0, 1]
