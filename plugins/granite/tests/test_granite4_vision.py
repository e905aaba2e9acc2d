"""Granite 4 Vision, served by vlreg-granite: what the suite (`test_conformance.TestGranite4Vision`)
cannot say.

* the features are added before text blocks 0 and 1 (`vlreg.plugin.Injections`): block 0's
  set is ``vision.image_features``, each block's ``deepstack_input``, and an edit of the later
  set reaches the logits too;
* the logits are ``lm_head``'s output divided by ``text_config.logits_scaling``;
* the geometry counts the image tokens at the mask's positions: the base image, then the
  unpadded crops with a newline token ending each row, a token per 2 x 2 patches;
* the Q-Former inside each projector (``blip_2_qformer``, which vlreg-blip claims as a part of
  its own wrappers) loads with the checkpoint's weights.
"""

from __future__ import annotations

import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

CHECKPOINT = "granite4_vision"
PICTURES = (image(112, 84), image(56, 56, seed=1))


def test_the_features_are_added_before_blocks_0_and_1(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].deepstack_input.save()
        stream = model.layers[0].input.save()
        out = model.layers[0].layer_output.save()
        second = model.layers[1].deepstack_input.save()
        after = model.layers[1].input.save()
    assert torch.equal(first, features) and torch.equal(stream[mask], features)
    assert not torch.equal(second, features)  # the spatial projector's set, from another tower block
    assert torch.equal(after[mask], out[mask] + second) and torch.equal(after[~mask], out[~mask])
    with model.trace(chat(model), images=[PICTURES[0]]):
        plain = model.logits.save()
    with model.trace(chat(model), images=[PICTURES[0]]):
        model.layers[1].deepstack_input = torch.zeros_like(model.layers[1].deepstack_input)
        edited = model.logits.save()
    assert not torch.allclose(plain, edited)


def test_the_logits_are_lm_heads_output_divided(model):
    with model.trace(chat(model), images=[PICTURES[0]]):
        unscaled = model.uncapped_logits.save()
        logits = model.logits.save()
    assert model._module.config.text_config.logits_scaling == 4.0
    torch.testing.assert_close(logits, unscaled / 4.0)


def test_the_geometry_counts_the_masks_tokens(model):
    prompt = chat(model, images=2)
    geometries = model.vision.geometry(prompt, list(PICTURES))
    with model.trace(prompt, images=list(PICTURES)):
        mask = model.vision.image_token_mask.save()
    assert torch.equal(mask[0].nonzero().flatten(), torch.cat([geometry.positions for geometry in geometries]))
    # 112 x 84 pixels: the base 2 x 2, then 2 x 4 crops' tokens with 2 unpadded rows (+ newlines); 56 x 56: 2 x 2
    assert [[grid.label for grid in geometry.grids] for geometry in geometries] == [["base", "tiles"]] * 2
    assert [geometry.tokens for geometry in geometries] == [int(mask[0].sum()) - geometries[1].tokens,
                                                           geometries[1].tokens]
    base = geometries[0].grids[0]
    assert (base.rows, base.columns) == (2, 2)


def test_the_qformer_in_each_projector_loads_its_weights(model):
    from pathlib import Path

    from safetensors.torch import load_file

    assert model.family.parts["qformer_config"].model_type == "blip_2_qformer"
    assert model.family.served_by("qformer_config") == "blip" and not model.family.unserved
    folder = Path(model._module.config._name_or_path)
    stored = {}
    for shard in folder.glob("*.safetensors"):
        stored.update(load_file(shard))
    projectors = model._module.model
    for name, module in (("layerwise_projectors.0", projectors.layerwise_projectors[0]),
                         ("spatial_projectors.0", projectors.spatial_projectors[0])):
        for key, weight in module.qformer.state_dict().items():
            assert torch.equal(weight, stored[f"model.{name}.qformer.{key}"]), key
