"""The window-order helpers against transformers' own window index, on grids the tests'
images do not reach: windows that divide the grid exactly, one window, videos, and
several images of different shapes."""

from __future__ import annotations

import pytest
import torch
from transformers.vision_utils import get_vision_window_index

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg_qwen2_5_vl import window_layout

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
def vision():
    path = str(build("qwen2_5_vl"))
    return StandardizedTransformer(path, task="image-text-to-text", dispatch=True, device="cpu").vision


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
