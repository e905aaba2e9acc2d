"""Window order on a tiny Qwen2.5-VL whose 56-pixel windows are smaller than the images.

Two images go into one invoke (112 x 168 and 168 x 112 pixels, six windows each), so
every check also covers where one image's rows end and the next one's begin. Then the
window-order helpers against transformers' own window index, on grids the tests' images
do not reach: windows that divide the grid exactly, one window, videos, and several
images of different shapes.
"""

from __future__ import annotations

import pytest
import torch
from transformers.vision_utils import get_vision_window_index

from vlreg import Unavailable
from vlreg.testing.conformance import image
from vlreg_qwen2_5_vl import window_layout

CHECKPOINT = "qwen2_5_vl"

SIZES = ((112, 168), (168, 112))
WINDOWED, FULL = 0, 1
PATCH, MERGE = 14, 2
GRIDS = (
    [[1, 12, 8]],
    [[1, 16, 16]],
    [[1, 4, 4]],
    [[1, 2, 2]],
    [[1, 6, 10], [1, 8, 8], [2, 12, 4]],
    [[1, 34, 22], [1, 10, 36]],
)


@pytest.fixture(scope="module")
def prompt(model):
    content = [{"type": "image"}] * len(SIZES) + [{"type": "text", "text": "What is in this image?"}]
    messages = [{"role": "user", "content": content}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


@pytest.fixture(scope="module")
def images():
    return [image(width, height, seed) for seed, (width, height) in enumerate(SIZES)]


@pytest.fixture(scope="module")
def grid(model, prompt, images):
    return model.processor(text=prompt, images=images, return_tensors="pt")["image_grid_thw"]


@pytest.fixture(scope="module")
def run(model, prompt, images):
    """One trace reading every value the tests need, in forward order."""
    vision = model.vision
    saved: dict = {}
    calls: list = []  # made outside the trace: names first bound inside one do not leave it
    with model.trace(prompt, images=images):
        saved["mask"] = vision.image_token_mask.save()
        saved["grid"] = vision.inputs[1]["grid_thw"].save()
        saved["embedded"] = vision.patch_embeddings.save()
        saved["entering"] = vision.layers[0].input.save()
        for block in vision.layers:
            attention = block.self_attn
            calls.append((
                attention.inputs[1]["cu_seqlens"].save(),
                attention.attention_queries.save(),
                attention.attention_keys.save(),
                attention.attention_values.save(),
                attention.attention_head_outputs.save(),
            ))
        saved["last"] = vision.layers[-1].output.save()
        saved["fed"] = model.projector.input.save()
        saved["projected"] = model.projector.output.save()
        saved["tower"] = vision.tower_output.save()
        saved["features"] = vision.image_features.save()
        saved["first"] = model.layers[0].input.save()
    saved["calls"] = calls
    return saved


def _permutation(moved: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The row of ``rows`` each row of ``moved`` is, asserting ``moved`` is a permutation of
    ``rows`` (every row found exactly once, the rows all distinct)."""
    matches = (moved[:, None, :] == rows[None, :, :]).all(-1)
    assert (matches.sum(0) == 1).all() and (matches.sum(1) == 1).all()
    return matches.int().argmax(1)


def test_the_images_span_several_windows(model, grid):
    assert model.vision.window_size == 56
    assert model.vision.fullatt_block_indexes == (FULL,)
    side = model.vision.window_size // model.vision.patch_size
    for _, height, width in grid.tolist():
        assert height > side and width > side


def test_features_are_what_block_0_receives(run):
    mask, features, first = run["mask"], run["features"], run["first"]
    assert int(mask.sum()) == features.shape[0] == run["projected"].shape[0]
    assert torch.equal(first[mask], features)


def test_projector_output_is_the_features_in_window_order(model, run, grid):
    projected, features = run["projected"], run["features"]
    assert not torch.equal(projected, features)
    order = _permutation(projected, features)
    assert torch.equal(order, model.vision.window_index(grid))
    assert torch.equal(model.vision.to_scatter_order(projected, grid), features)
    assert torch.equal(model.vision.to_window_order(features, grid), projected)


def test_block_0_receives_the_patch_embeddings_in_window_order(model, run, grid):
    embedded, entering = run["embedded"][0], run["entering"]
    assert entering.shape == embedded.shape
    assert not torch.equal(entering, embedded)
    _permutation(entering, embedded)
    assert torch.equal(model.vision.to_window_order(embedded, grid), entering)
    assert torch.equal(model.vision.to_scatter_order(entering, grid), embedded)
    assert torch.equal(model.vision.to_scatter_order(run["entering"][None], grid), run["embedded"])


def test_tower_output_is_the_last_block_in_window_order(model, run, grid):
    tower = run["tower"]
    assert tower.dim() == 3 and torch.equal(tower[0], run["last"])
    assert torch.equal(run["fed"], tower[0])
    merger = model.projector._module
    in_token_order = merger(model.vision.to_scatter_order(tower, grid)[0])
    torch.testing.assert_close(in_token_order, run["features"])


def test_the_tower_reads_the_processors_grid(run, grid):
    assert torch.equal(run["grid"], grid)


def test_windowed_blocks_call_per_window_full_blocks_per_image(model, run, grid):
    images = len(SIZES)
    for index, (cu_seqlens, *_) in enumerate(run["calls"]):
        assert torch.equal(cu_seqlens, model.vision.cu_seqlens(index, grid)), index
        assert int(cu_seqlens[-1]) == run["entering"].shape[0]
    windowed = run["calls"][WINDOWED][0]
    full = run["calls"][FULL][0]
    assert len(windowed) - 1 > images
    assert len(full) - 1 == images
    assert torch.equal(full, torch.tensor([0, *grid.prod(-1).cumsum(0).tolist()], dtype=torch.int32))
    window = (model.vision.window_size // model.vision.patch_size) ** 2
    assert set(windowed.diff().tolist()) == {window}


def test_per_call_patterns_reproduce_the_head_outputs(model, run):
    for index, (cu_seqlens, queries, keys, values, heads) in enumerate(run["calls"]):
        attention = model.vision.layers[index].self_attn
        patterns = attention.patterns(queries, keys, cu_seqlens)
        assert len(patterns) == len(cu_seqlens) - 1
        bounds = zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist())
        for pattern, (start, end) in zip(patterns, bounds):
            assert tuple(pattern.shape) == (model.vision.num_heads, end - start, end - start)
            torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:2]))
            mixed = (pattern @ values[0, :, start:end]).transpose(0, 1)
            assert torch.equal(mixed, heads[0, start:end]), (index, start)


def test_the_pattern_is_unavailable_with_the_per_call_reason(model, prompt, images):
    for name in ("attention_scores", "attention_probabilities"):
        with pytest.raises(Unavailable, match="once per window on a windowed block"):
            with model.trace(prompt, images=images):
                getattr(model.vision.layers[WINDOWED].self_attn, name).save()


def test_block_identity_on_tower_and_text_blocks(model, prompt, images):
    tower, text = [], []
    with model.trace(prompt, images=images):
        for block in model.vision.layers:
            tower.append((block.input.save(), block.self_attn.attention_output.save(),
                          block.mlp.mlp_output.save(), block.layer_output.save()))
        for block in model.layers:
            text.append((block.input.save(), block.self_attn.attention_output.save(),
                         block.mlp.mlp_output.save(), block.layer_output.save()))
    for x, attention, mlp, out in tower + text:
        torch.testing.assert_close(x + attention + mlp, out)


def test_an_edit_in_window_order_reaches_its_image_token(model, prompt, images, grid):
    """Zeroing one merge block of the last tower block, at a window-order position that is
    not its token's position, changes exactly the image token `window_index` names."""
    tokens = model.vision.window_index(grid)
    position = int((tokens != torch.arange(len(tokens))).nonzero()[0])
    unit = model.vision.spatial_merge_size**2
    with model.trace(prompt, images=images):
        plain = model.vision.image_features.save()
    with model.trace(prompt, images=images):
        model.vision.layers[-1].layer_output[0, unit * position : unit * (position + 1)] = 0
        edited = model.vision.image_features.save()
    changed = (plain != edited).any(-1).nonzero().flatten().tolist()
    assert changed == [int(tokens[position])] != [position]


@pytest.fixture(scope="module")
def vision(model):
    return model.vision


@pytest.mark.parametrize("window", (56, 112))
@pytest.mark.parametrize("grid", GRIDS, ids=str)
def test_layout_is_the_towers(grid, window):
    grid = torch.tensor(grid)
    expected_order, expected_bounds = get_vision_window_index(
        grid, spatial_merge_size=MERGE, window_size=window, patch_size=PATCH
    )
    order, sizes = window_layout(grid, window // PATCH // MERGE, MERGE)
    assert torch.equal(order, expected_order)
    bounds = torch.tensor([0, *sizes]).cumsum(0) * MERGE**2
    assert torch.equal(bounds.to(torch.int32), expected_bounds)


@pytest.mark.parametrize("grid", GRIDS, ids=str)
def test_helpers_invert_each_other(vision, grid):
    patches = int(torch.tensor(grid).prod(-1).sum())
    generator = torch.Generator().manual_seed(0)
    shapes = {
        -2: [(patches, 3), (1, patches, 3), (1, 2, patches, 3), (patches // MERGE**2, 5)],
        1: [(1, patches, 2, 3)],
    }
    for dim, tensors in shapes.items():
        for shape in tensors:
            rows = torch.randn(shape, generator=generator)
            moved = vision.to_window_order(rows, grid, dim=dim)
            assert torch.equal(vision.to_scatter_order(moved, grid, dim=dim), rows)
            assert torch.equal(vision.to_window_order(vision.to_scatter_order(rows, grid, dim=dim), grid, dim=dim), rows)


def test_patch_rows_move_with_their_merge_block(vision):
    grid = [[1, 12, 8]]
    tokens = vision.window_index(grid)
    patches = torch.arange(12 * 8)
    moved = vision.to_window_order(patches[:, None], grid)[:, 0]
    unit = MERGE**2
    assert torch.equal(moved.reshape(-1, unit) // unit, tokens[:, None].expand(-1, unit))
    assert torch.equal(moved.reshape(-1, unit) % unit, torch.arange(unit).expand(len(tokens), -1))


def test_call_bounds_per_block(vision):
    grid = torch.tensor([[1, 6, 10], [2, 12, 4]])
    full = vision.cu_seqlens(1, grid)
    assert full.tolist() == [0, 60, 108, 156]  # one call per image, per frame of a video
    assert torch.equal(vision.cu_seqlens(-1, grid), full)
    windowed = vision.cu_seqlens(0, grid)
    assert torch.equal(windowed, get_vision_window_index(grid, MERGE, vision.window_size, PATCH)[1])


def test_a_row_count_off_the_grid_is_refused(vision):
    with pytest.raises(ValueError, match="96 patches and 24 merged tokens"):
        vision.to_scatter_order(torch.zeros(50, 3), [[1, 12, 8]])
