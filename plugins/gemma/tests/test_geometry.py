"""The Gemma image grids against the processors' own resizing, on 60 image sizes each.

For every size the processor runs on a prompt with the image; the declared grid must have
as many tokens as the processor put in the prompt, its boxes must tile the original image
(equal cells, edge to edge, from the corner to the far corner), and its raster of tokens,
times the fold, must be the raster of patches the processor made, at the scale the
processor resized by. Only Gemma 3n's lit-pixel test loads a model: its tower is
convolutional, so where a pixel lands is read off the tower itself."""

from __future__ import annotations

import math
import random

import pytest
import torch
from PIL import Image
from transformers import AutoConfig, AutoProcessor

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image, lit
from vlreg_gemma.geometry import image_grids

#: (width, height): the corners of the range, extreme aspects, and random sizes
SIZES = [(1, 1), (7, 300), (300, 7), (56, 56), (57, 55), (1000, 10), (10, 1000), (640, 480)]
SIZES += [(random.Random(n).randint(8, 700), random.Random(n + 1000).randint(8, 700)) for n in range(52)]


def grids_for(name: str):
    path = build(name)
    config, processor = AutoConfig.from_pretrained(path), AutoProcessor.from_pretrained(path)
    return config, processor, image_grids(config)


def encode(processor, size):
    picture = image(*size)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return picture, processor(text=prompt, images=[picture], return_tensors="pt")


def assert_tiles(grid, width: float, height: float) -> None:
    """The boxes are a raster of equal cells covering the image exactly."""
    boxes = grid.boxes.reshape(grid.rows, grid.columns, 4)
    cell_w, cell_h = width / grid.columns, height / grid.rows
    columns = torch.arange(grid.columns, dtype=torch.float64) * cell_w
    rows = torch.arange(grid.rows, dtype=torch.float64) * cell_h
    torch.testing.assert_close(boxes[..., 0], columns.expand(grid.rows, -1))
    torch.testing.assert_close(boxes[..., 1], rows[:, None].expand(-1, grid.columns))
    torch.testing.assert_close(boxes[..., 2] - boxes[..., 0], torch.full((grid.rows, grid.columns), cell_w, dtype=torch.float64))
    torch.testing.assert_close(boxes[..., 3] - boxes[..., 1], torch.full((grid.rows, grid.columns), cell_h, dtype=torch.float64))
    torch.testing.assert_close(boxes[-1, -1, 2:], torch.tensor([width, height], dtype=torch.float64))


@pytest.mark.parametrize("name", ["gemma3", "paligemma"])
def test_a_square_processor_squeezes_the_whole_image(name):
    config, processor, grids = grids_for(name)
    patch = config.vision_config.patch_size
    for size in SIZES:
        picture, encoding = encode(processor, size)
        (grid,) = grids(encoding, [picture], processor)
        assert int((encoding["input_ids"] == config.image_token_id).sum()) == grid.tokens, size
        side = encoding["pixel_values"].shape[-1]
        assert encoding["pixel_values"].shape[-2:] == (side, side) == (config.vision_config.image_size,) * 2
        assert grid.rows * grid.fold * patch == grid.columns * grid.fold * patch == side, size
        assert_tiles(grid, *size)
    assert grid.fold == (2 if name == "gemma3" else 1)


def _patch_raster(encoding):
    """The processor's raster of patches (or of merged patches), from the positions it
    gives them: ``(columns, rows)``, and whether they come in raster order."""
    positions = encoding["image_position_ids"][0]
    real = positions[(positions != -1).all(-1)]
    columns, rows = int(real[:, 0].max()) + 1, int(real[:, 1].max()) + 1
    raster = torch.stack(torch.meshgrid(torch.arange(columns), torch.arange(rows), indexing="xy"), -1).reshape(-1, 2)
    return columns, rows, torch.equal(real, raster)


def test_gemma4_tokens_are_k_by_k_blocks_of_the_resized_images_patches():
    config, processor, grids = grids_for("gemma4")
    vision = processor.image_processor
    k, patch = vision.pooling_kernel_size, vision.patch_size
    for size in SIZES:
        picture, encoding = encode(processor, size)
        (grid,) = grids(encoding, [picture], processor)
        assert int((encoding["input_ids"] == config.image_token_id).sum()) == grid.tokens, size
        columns, rows, in_raster = _patch_raster(encoding)
        assert in_raster and grid.fold == k, size
        assert (grid.rows * k, grid.columns * k) == (rows, columns), size
        assert encoding["pixel_values"].shape[1] == vision.max_soft_tokens * k**2  # padded to the budget
        assert_tiles(grid, *size)
        assert float(grid.boxes[0, 2]) == pytest.approx(size[0] * k / columns)  # the resize's own scale


def test_gemma4_unified_tokens_are_the_merged_patches_in_raster_order():
    config, processor, grids = grids_for("gemma4_unified")
    vision = processor.image_processor
    for size in SIZES:
        picture, encoding = encode(processor, size)
        (grid,) = grids(encoding, [picture], processor)
        assert int((encoding["input_ids"] == config.image_token_id).sum()) == grid.tokens, size
        columns, rows, in_raster = _patch_raster(encoding)
        assert in_raster and grid.fold == 1, size
        assert (grid.rows, grid.columns) == (rows, columns), size
        assert encoding["pixel_values"].shape[1] == vision.max_soft_tokens
        assert_tiles(grid, *size)


def test_gemma4_pooler_averages_each_tokens_own_patches():
    """transformers' pooler, run on one-hot patches, pools into token ``t`` exactly the
    patches whose pixels lie in the grid's box ``t`` (the fold and the raster agree)."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4VisionPooler

    config, processor, grids = grids_for("gemma4")
    pooler = Gemma4VisionPooler(config.vision_config)
    patch = processor.image_processor.patch_size
    for size in [(112, 84), (40, 40), (9, 200)]:
        picture, encoding = encode(processor, size)
        (grid,) = grids(encoding, [picture], processor)
        positions = encoding["image_position_ids"]
        real = int((positions[0] != -1).all(-1).sum())
        onehot = torch.eye(positions.shape[1])[None, :, :real]  # [1, patches, real patches]
        budget = positions.shape[1] // grid.fold**2  # the tower pools to the whole budget, then drops padding
        pooled, kept = pooler._avg_pool_by_positions(onehot, positions, budget)
        assert int(kept.sum()) == grid.tokens and bool(kept[0, : grid.tokens].all())
        members = pooled[0, : grid.tokens] > 0  # [tokens, real patches]
        columns, rows = (int(positions[0, :real, axis].max()) + 1 for axis in (0, 1))
        scale = torch.tensor([size[0] / (columns * patch), size[1] / (rows * patch)], dtype=torch.float64)
        for token in range(grid.tokens):
            corners = positions[0, :real][members[token]].double() * patch * scale  # the patches' top-left pixels
            box = grid.boxes[token]
            assert members[token].sum() == grid.fold**2
            assert (corners >= box[:2] - 1e-9).all() and (corners < box[2:] - 1e-9).all(), (size, token)


def test_the_real_gemma4_processor_on_its_published_budget():
    """Transformers' default Gemma 4 image processor (16-pixel patches, 3 x 3 to a token,
    280 tokens at most), on a few sizes: the counts the processor gives."""
    from transformers import Gemma4ImageProcessor, Gemma4UnifiedImageProcessor

    from vlreg_gemma.geometry import aspect_grids

    for cls, model_type, fold in ((Gemma4ImageProcessor, "gemma4", 3), (Gemma4UnifiedImageProcessor, "gemma4_unified", 1)):
        vision = cls()
        processor = type("P", (), {"image_processor": vision})()
        declare = aspect_grids(type("C", (), {"model_type": model_type})())
        for size in [(896, 896), (1280, 720), (300, 2000), (64, 64)]:
            picture = image(*size)
            (grid,) = declare(None, [picture], processor)
            tokens = vision(images=[picture], return_tensors="pt")["num_soft_tokens_per_image"][0]
            assert grid.tokens == tokens <= 280 and grid.fold == fold, (cls.__name__, size)


def test_gemma3n_squeezes_the_whole_image_to_the_towers_grid():
    config, processor, grids = grids_for("gemma3n")
    side = math.isqrt(config.vision_soft_tokens_per_image)
    for size in SIZES:
        picture, encoding = encode(processor, size)
        (grid,) = grids(encoding, [picture], processor)
        assert int((encoding["input_ids"] == config.image_token_id).sum()) == grid.tokens == side * side, size
        assert encoding["pixel_values"].shape[-2:] == (processor.image_processor.size["height"],) * 2
        assert (grid.rows, grid.columns, grid.fold) == (side, side, 1)
        assert_tiles(grid, *size)


@pytest.fixture(scope="module")
def gemma3n():
    return StandardizedTransformer(str(build("gemma3n")), task="image-text-to-text", dispatch=True, device="cpu",
                                   attn_implementation="eager")


@pytest.mark.parametrize("x, y", [(3, 3), (35, 5), (12, 25), (38, 28), (21, 14)])
def test_gemma3n_a_lit_pixel_lands_on_the_token_whose_box_holds_it(gemma3n, x, y):
    """The pixel is read where the tower still keeps it local: the stem's map
    (``patch_embeddings``, a 3 x 3 convolution), which changes most, between a black image
    and the same image with one white pixel, at a position inside the block of the map that
    the token whose box holds the pixel stands for (the tower keeps the map's layout down to
    its fusion adapter's ``k`` x ``k`` grid, so token ``(r, c)`` is block ``(r, c)`` of the
    map). At the grid itself the tiny tower's receptive fields, wider than its 64-pixel
    input, and its global attention spread one pixel over every token, which tests nothing."""
    model, (width, height) = gemma3n, (40, 30)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is this?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    (geometry,) = model.vision.geometry(prompt, [lit(width, height, x, y)])
    (grid,) = geometry.grids
    holding = [i for i, (x0, y0, x1, y1) in enumerate(grid.boxes.tolist()) if x0 <= x + 0.5 < x1 and y0 <= y + 0.5 < y1]
    assert len(holding) == 1 and geometry.tokens == model._module.config.vision_soft_tokens_per_image
    stems = []
    for picture in (Image.new("RGB", (width, height), "black"), lit(width, height, x, y)):
        with model.trace(prompt, images=[picture]):
            stems.append(model.vision.patch_embeddings.save())
    side = math.isqrt(stems[0].shape[1])
    change = (stems[1] - stems[0]).abs().sum(-1)[0].reshape(side, side)
    row, column = divmod(int(change.argmax()), side)
    block = side // grid.rows
    assert (row // block) * grid.columns + column // block == holding[0]
