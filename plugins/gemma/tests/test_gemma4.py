"""What is particular to Gemma 4 and Gemma 4 unified, beyond the conformance suite."""

import math

import pytest
import torch

from vlreg import Unavailable, analysis
from vlreg.testing import chat
from vlreg.testing.conformance import image

PICTURE = image(112, 84)


def test_the_chat_template_writes_gemma4_turns(loaded):
    assert chat(loaded("gemma4")) == "<bos><|turn>user\n<|image|>What is in this image?<turn|>\n<|turn>model\n"


@pytest.mark.parametrize("name", ["gemma4", "gemma4_unified"])
def test_a_block_is_its_sublayers_and_per_layer_input_times_its_scalar(loaded, name):
    """``layer_output == (input + attention_output + mlp_output + per_layer_output) *
    layer_scalar``; the unified line has no per-layer input."""
    model = loaded(name)
    rows = []
    with model.trace(chat(model), images=[PICTURE]):
        for block in model.layers:
            x, attention, mlp = block.input.save(), block.self_attn.attention_output.save(), block.mlp.mlp_output.save()
            ple = block.per_layer_output.save() if name == "gemma4" else None
            rows.append((x, attention, mlp, ple, block.layer_output.save()))
    for block, (x, attention, mlp, ple, out) in zip(model.layers, rows):
        scalar = block.layer_scalar
        assert scalar.item() != 1.0
        summed = x + attention + mlp + (ple if ple is not None else 0)
        torch.testing.assert_close(summed * scalar, out)
    if name == "gemma4_unified":
        assert "per_layer_output" not in model.support()


def test_the_towers_blocks_start_from_patches_plus_positions(loaded):
    model = loaded("gemma4")
    vision = model.vision
    with model.trace(chat(model), images=[PICTURE]):
        patches = vision.patch_embeddings.save()
        positions = vision.position_embeddings.save()
        first = vision.layers[0].input.save()
        tower = vision.tower_output.save()
        projected_from = model.projector.input.save()
    budget = model.processor.image_processor.max_soft_tokens * 4
    assert patches.shape == positions.shape == first.shape == tower.shape == (1, budget, vision.vision_hidden_size)
    torch.testing.assert_close(patches + positions, first)
    (geometry,) = vision.geometry(chat(model), [PICTURE])
    grid = geometry.grids[0]
    own = grid.tokens * grid.fold**2
    assert positions[0, own:].abs().max() == 0, "padding has no position"
    # the pooler averages each k x k block of the raster of patches into a token, scaled by sqrt(width)
    raster = tower[0, :own].reshape(grid.rows, grid.fold, grid.columns, grid.fold, -1)
    pooled = raster.mean((1, 3)).reshape(grid.tokens, -1) * math.sqrt(vision.vision_hidden_size)
    torch.testing.assert_close(projected_from, pooled)


def test_the_pooled_towers_pattern_folds_its_own_patches(loaded):
    """tower_patterns on the padded tower: the pattern over the image's own patches (the
    padding after them is masked as keys), folded 2 x 2, checked by hand."""
    model = loaded("gemma4")
    found = analysis.tower_patterns(model, chat(model), [PICTURE], layer=0)
    with model.trace(chat(model), images=[PICTURE]):
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
    (geometry,) = found.geometry
    grid = geometry.grids[0]
    own = grid.tokens * grid.fold**2
    assert pattern[0, :, :own, own:].abs().max() == 0, "a patch attends to padding"
    patch_rows = torch.arange(own) // (grid.columns * grid.fold) // grid.fold
    patch_columns = torch.arange(own) % (grid.columns * grid.fold) // grid.fold
    token = patch_rows * grid.columns + patch_columns
    members = torch.nn.functional.one_hot(token, grid.tokens).float()
    expected = members.T @ pattern[0, :, :own, :own].float() @ members / grid.fold**2
    torch.testing.assert_close(found.patterns[0], expected)
    torch.testing.assert_close(found.patterns[0].sum(-1), torch.ones(model.vision.num_heads, grid.tokens))


@pytest.mark.parametrize("name", ["gemma4", "gemma4_unified"])
def test_an_images_tokens_see_each_other_where_the_config_says(loaded, name):
    """Gemma 4 (use_bidirectional_attention="vision"): on sliding blocks only; Gemma 4
    unified (its default "vision"): on every block. Text tokens stay causal."""
    model = loaded(name)
    patterns = []
    with model.trace(chat(model), images=[PICTURE]):
        mask = model.vision.image_token_mask.save()
        for block in model.layers:
            patterns.append(block.self_attn.attention_probabilities.save())
    positions = mask[0].nonzero().flatten()
    text_rows = (~mask[0]).nonzero().flatten()
    types = model._module.config.text_config.layer_types
    for block, pattern in zip(model.layers, patterns):
        among = pattern[0][:, positions][:, :, positions].triu(1).abs().max()
        bidirectional = name == "gemma4_unified" or types[block.block_index] == "sliding_attention"
        assert (among > 0) == bidirectional, (block.block_index, types[block.block_index])
        assert pattern[0].triu(1)[:, text_rows].abs().max() == 0
    assert "tokens of one image attend to each other" in type(model.layers[0].self_attn).attention_probabilities.description


def test_a_block_whose_keys_later_blocks_reuse_is_skipped_only_with_them(loaded):
    """The tiny Gemma 4's blocks 2 and 3 reuse blocks 0's and 1's keys and values."""
    model = loaded("gemma4")
    with pytest.raises(Unavailable, match=r"layers\[0\], which cannot be skipped: layers \[2\] reuse"):
        with model.trace(chat(model), images=[PICTURE]):
            analysis.skip_layers(model, 0, 1)
    with model.trace(chat(model), images=[PICTURE]):
        analysis.skip_layers(model, 1, 3)
        last = model.layers[3].layer_output.save()
    with model.trace(chat(model), images=[PICTURE]):
        entering = model.layers[1].input.save()
    assert torch.equal(entering, last)


def test_the_unified_embedder_is_a_vision_part_with_no_blocks(loaded):
    model = loaded("gemma4_unified")
    vision = model.vision
    with model.trace(chat(model), images=[PICTURE]):
        patches = vision.patch_embeddings.save()
        positions = vision.position_embeddings.save()
        normed = vision.pos_norm.output.save()
        tower = vision.tower_output.save()
        projected = model.projector.output.save()
        features = vision.image_features.save()
    torch.testing.assert_close(vision.pos_norm._module(patches + positions), normed)
    assert torch.equal(tower, normed)
    tokens = features.shape[0]
    assert torch.equal(projected[0, :tokens], features), "the projected rows, padding dropped"
    assert vision.num_layers == 0 and vision.patch_size == 8 and vision.vision_hidden_size == 32
    for size in ("num_heads", "head_dim", "intermediate_size"):
        with pytest.raises(Unavailable, match="no vision tower"):
            getattr(vision, size)
    with pytest.raises(Unavailable, match="has no blocks"):
        analysis.tower_patterns(model, chat(model), [PICTURE])
    assert "vision.layers[0]" not in str(_out_of_order(model))


def _out_of_order(model):
    """The forward order a misordered read names (it must not mention tower blocks here)."""
    from vlreg import OutOfOrder

    try:
        with model.trace(chat(model), images=[PICTURE]):
            model.layers[0].input.save()
            model.vision.image_features.save()
    except OutOfOrder as error:
        return error
    raise AssertionError("reading the features after block 0 was not refused")


def test_writing_the_unified_tower_output_reaches_the_features(loaded):
    model = loaded("gemma4_unified")
    with model.trace(chat(model), images=[PICTURE]):
        model.vision.tower_output[:] = 0
        features = model.vision.image_features.save()
    assert features.abs().max() == 0  # an RMS-normed zero, projected: zero
