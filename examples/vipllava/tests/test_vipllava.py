"""What is particular to this plugin, beyond the conformance suite: its claim overrides
vlreg-llava's, its chat format, and its geometry. (The suite checks its read-only rows,
a sample a run: a write it declares read-only is refused, every other reaches the logits; what
transformers' projector reads is vlreg-llava's test, plugins/llava/tests/test_vipllava.py.)"""

import numpy as np
import pytest
import torch
from PIL import Image

from vlreg.testing import chat
from vlreg_llava import plugin as llava
from vlreg_vipllava import plugin

CHECKPOINT = "vipllava"


def test_only_the_wrapper_is_this_plugins_which_overrides_vlreg_llavas(model):
    """vlreg-llava claims the ``vipllava`` wrapper too; this plugin's claim overrides it."""
    assert model.family.plugins == {"wrapper": plugin, "text": llava, "vision": llava}
    assert ("wrapper", "vipllava") in llava.parts


def test_the_chat_template_writes_vipllavas_turns(model):
    assert chat(model).endswith("questions.###Human: <image>\nWhat is in this image?###Assistant:")


@pytest.mark.parametrize("size", [(112, 84), (84, 112), (56, 56), (300, 57), (57, 300), (1000, 640), (61, 59), (200, 200)])
def test_each_tokens_box_is_the_pixels_its_patch_holds(model, size):
    """A picture whose red and green channels are its x and y: each token's patch, as the
    processor made it, holds the colours of the middle of the token's box."""
    width, height = size
    x, y = np.meshgrid((np.arange(width) + 0.5) / width, (np.arange(height) + 0.5) / height)
    picture = Image.fromarray((np.stack([x, y, np.zeros_like(x)], -1) * 255).round().astype("uint8"))
    (geometry,) = model.vision.geometry(chat(model), [picture])
    (grid,) = geometry.grids
    vision = model.processor.image_processor
    pixels = model.processor(text=chat(model), images=[picture], return_tensors="pt")["pixel_values"][0]
    pixels = pixels * torch.tensor(vision.image_std)[:, None, None] + torch.tensor(vision.image_mean)[:, None, None]
    patch = model.vision.patch_size
    held = pixels[:2].reshape(2, grid.rows, patch, grid.columns, patch).mean((2, 4)).permute(1, 2, 0).reshape(-1, 2)
    middles = (grid.boxes[:, :2] + grid.boxes[:, 2:]) / 2 / torch.tensor([width, height], dtype=torch.float64)
    torch.testing.assert_close(held.double(), middles, atol=0.02, rtol=0)
