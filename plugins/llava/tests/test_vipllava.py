"""VipLLaVA, served by vlreg-llava: what the suite (`test_conformance.TestVipLlava`) cannot say.

* the projector reads several tower blocks (``vision_feature_layer`` [-2, 1] on the tiny
  checkpoint), each without its class token, concatenated in the config's order; what it
  does not read refuses writes, naming the block to edit instead;
* geometry over CLIP's centre crop: a pixel lit at a token box's centre lands in that
  token's patch of what the processor hands the tower, and each image's grid is its image
  tokens in the prompt, at the mask's positions.
"""

from __future__ import annotations

import pytest
import torch

from vlreg import ReadOnly
from vlreg.testing import chat
from vlreg.testing.conformance import image, lit
from vlreg_llava import plugin

#: (width, height): squares, landscape and portrait past the crop, odd sides, small ones.
SIZES = ((56, 56), (112, 84), (84, 112), (300, 57), (61, 59), (20, 30))

CHECKPOINT = "vipllava"


def test_vlreg_llava_serves_the_wrapper_with_its_own_tower_and_text(model):
    assert model.family.plugins == {"wrapper": plugin, "text": plugin, "vision": plugin}
    assert chat(model).endswith("questions.###Human: <image>\nWhat is in this image?###Assistant:")




def test_the_projector_reads_two_blocks_without_their_class_tokens(model):
    with model.trace(chat(model), images=[image(90, 60)]):
        first = model.vision.layers[0].layer_output.save()
        second = model.vision.layers[1].layer_output.save()
        fed = model.projector.input.save()
    assert torch.equal(fed, torch.cat([second[:, 1:], first[:, 1:]], dim=-1))  # vision_feature_layer [-2, 1]


def test_what_the_projector_does_not_read_refuses_writes(model):
    assert "edit vision.layers[1].layer_output" in model.read_only()["vision.tower_output"]
    with pytest.raises(ReadOnly, match="nothing a later block computes reaches the text model"):
        with model.trace(chat(model), images=[image(90, 60)]):
            model.vision.layers[2].layer_output[:] = 0


@pytest.mark.parametrize("size", SIZES)
def test_a_lit_pixel_lands_in_the_patch_of_the_token_whose_box_holds_it(model, size):
    """Over the sampled tokens the crop shows: the brightest pixel of the tower's input, a
    pixel lit at the token's box centre, is in that token's patch."""
    patch = model.vision.patch_size
    (geometry,) = model.vision.geometry(chat(model), [image(*size)])
    (grid,) = geometry.grids
    covered = grid.covered.nonzero().flatten().tolist()
    assert covered, size
    for token in covered[:: max(1, len(covered) // 5)]:
        x0, y0, x1, y1 = grid.boxes[token].tolist()
        probe = lit(*size, (x0 + x1) / 2, (y0 + y1) / 2)
        assert geometry.token_at((x0 + x1) / 2, (y0 + y1) / 2) == token
        pixels = model.processor(text=chat(model), images=[probe], return_tensors="pt")["pixel_values"][0, 0]
        y, x = divmod(int(pixels.argmax()), pixels.shape[1])
        assert (y // patch, x // patch) == divmod(token, grid.columns), (size, token)


def test_each_images_grid_is_its_image_tokens(model):
    pictures = [image(112, 84), image(40, 150, seed=1)]
    prompt = chat(model, text="Two?", images=2)
    geometries = model.vision.geometry(prompt, pictures)
    with model.trace(prompt, images=pictures):
        mask = model.vision.image_token_mask.save()
    positions = torch.cat([geometry.positions for geometry in geometries])
    assert torch.equal(mask[0].nonzero().flatten(), positions)
    assert [geometry.tokens for geometry in geometries] == [16, 16]  # 4 x 4 patches of the 56-pixel crop
