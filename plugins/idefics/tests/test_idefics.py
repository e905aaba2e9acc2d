"""What Idefics3 and SmolVLM add: the pixel shuffle that folds a frame's patches into
tokens, checked by hand, and every helper of `vlreg.analysis` on tiled images, with
several prompts' images given a list per prompt as SmolVLM's processor needs them.

Each image here is cut into tiles and a global image (the tiny checkpoints resize every
image's longest edge to two tiles): 112 x 84 is 2 x 2 tiles, 5 frames of 2 x 2 tokens."""

from __future__ import annotations

import pytest
import torch

from vlreg import analysis
from vlreg.pictures import overlay
from vlreg.testing import chat
from vlreg.testing.conformance import image

FAMILIES = ("idefics3", "smolvlm")
PICTURE, OTHER = image(112, 84), image(112, 84, seed=7)


def blocks(side: int, fold: int) -> list[list[int]]:
    """For each token of a ``side`` x ``side`` grid, in raster order, the patches of the
    tower's ``side * fold`` a side raster it folds, row by row: written out by hand."""
    found = []
    for row in range(side):
        for column in range(side):
            found.append([(row * fold + i) * side * fold + column * fold + j for i in range(fold) for j in range(fold)])
    return found


# -- the pixel shuffle ----------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_each_feature_is_its_tokens_fold_of_patches_projected(loaded, name):
    """Token ``t`` of a frame's grid is the connector's map of the ``fold`` x ``fold``
    patches `blocks` lists, concatenated row by row: the patch <-> token map the grids'
    ``fold`` declares is the model's own."""
    model = loaded(name)
    (geometry,) = model.vision.geometry(chat(model), [PICTURE])
    with model.trace(chat(model), images=[PICTURE]):
        tower = model.vision.tower_output.save()
        features = model.vision.image_features.save()
    weight = model.projector.modality_projection.proj.weight.detach()
    fold = geometry.grids[0].fold
    assert fold == model._module.config.scale_factor and tower.shape[0] == len(geometry.grids)
    for frame, grid in enumerate(geometry.grids):
        for token, patches in enumerate(blocks(grid.rows, fold)):
            expected = weight @ tower[frame, patches].reshape(-1)
            torch.testing.assert_close(features[geometry.offset + frame * grid.tokens + token], expected)


@pytest.mark.parametrize("name", FAMILIES)
def test_tower_patterns_fold_a_tiles_pattern_into_its_tokens(loaded, name):
    """The tower's pattern in the first tile's frame, computed by hand from its queries and
    keys, folded by hand: a token's query rows averaged, its key columns summed."""
    model = loaded(name)
    layer = model.vision.num_layers - 1
    found = analysis.tower_patterns(model, chat(model), [PICTURE], layer=layer)
    attention = model.vision.layers[layer].self_attn
    with model.trace(chat(model), images=[PICTURE]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    scores = queries[0].double() @ keys[0].double().transpose(-1, -2) * model.vision.head_dim**-0.5
    pattern = scores.softmax(-1)  # [heads, patches, patches]: every patch of a tile is real, no mask
    grid = found.geometry[0].grids[found.grids[0]]
    assert found.grids == [0] and grid.label == "row_1_col_1"
    members = blocks(grid.rows, grid.fold)
    expected = torch.zeros(model.vision.num_heads, grid.tokens, grid.tokens, dtype=torch.float64)
    for query, asking in enumerate(members):
        for key, asked in enumerate(members):
            expected[:, query, key] = pattern[:, asking][:, :, asked].sum(-1).mean(-1)
    torch.testing.assert_close(found.patterns[0].double(), expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(found.patterns[0].sum(-1), torch.ones(model.vision.num_heads, grid.tokens))


def test_tower_patterns_refuse_several_tiled_images(loaded):
    model = loaded("idefics3")
    with pytest.raises(ValueError, match="one image at a time"):
        analysis.tower_patterns(model, chat(model, images=2), [PICTURE, OTHER])


# -- every helper ----------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_the_lens_after_the_last_block_is_the_readout(loaded, name):
    model = loaded(name)
    lens = analysis.logit_lens(model, chat(model), [PICTURE], top=3)
    (geometry,) = lens.geometry
    with model.trace(chat(model), images=[PICTURE]):
        logits = model.logits.save()
    best = logits[geometry.row, geometry.positions].float().softmax(-1).topk(3, dim=-1)
    assert lens.top_ids[0].shape == (model.num_layers, geometry.tokens, 3) and geometry.tokens == 20
    assert torch.equal(lens.top_ids[0][-1], best.indices)
    torch.testing.assert_close(analysis.project_on_vocab(model, logits.new_zeros(2, model.hidden_size)).shape[-1],
                               model.vocab_size)
    assert len(analysis.top_tokens(model, logits[0, -1], k=4)) == 4
    torch.testing.assert_close(analysis.next_token_probs(model, chat(model), [PICTURE]), logits[0, -1].float().softmax(-1))


@pytest.mark.parametrize("name", FAMILIES)
def test_occlusion_and_patching(loaded, name):
    model = loaded(name)
    prompt = chat(model)  # ablate_image's zeroing: AnalysisConformance checks it on every family
    found = analysis.occlusion(model, prompt, [PICTURE], batch=8)
    assert found.scores.shape == (20,) and found.scores.abs().max() > 0
    single = analysis.ablate_image(model, prompt, [PICTURE], tokens=[13], mode="mean")
    torch.testing.assert_close(found.scores[13], -single.effect[found.target])
    for grid in (0, -1):  # a tile's scores, and the global image's, drawn over the picture
        assert overlay(PICTURE, found.geometry[0], found.scores, grid=grid, bar=False).size == PICTURE.size
    same = analysis.patch_image(model, prompt, [PICTURE], [PICTURE], per_token=True, tokens=[0, 19], batch=8)
    assert same.effects.shape == (model.num_layers, 2) and (same.effects == 0).all()
    other = analysis.patch_image(model, prompt, [PICTURE], [OTHER], layers=[0])
    assert other.effects.shape == (1,) and other.effects[0] != 0


@pytest.mark.parametrize("name", FAMILIES)
def test_attention_steering_skipping_and_comparing(loaded, name):
    model = loaded(name)
    prompt = chat(model)
    found = analysis.attention_to_images(model, prompt, [PICTURE], position=-1)
    (geometry,) = found.geometry
    with model.trace(prompt, images=[PICTURE]):
        pattern = model.layers[1].self_attn.attention_probabilities.save()
        plain = model.logits.save()
    torch.testing.assert_close(found.weights[0][1], pattern[0, :, -1, geometry.positions].float())
    with model.trace(prompt, images=[PICTURE]):
        analysis.steer(model, 0, torch.ones(model.hidden_size), positions=geometry)
        steered = model.logits.save()
    with model.trace(prompt, images=[PICTURE]):
        analysis.skip_layers(model, 0, 0)
        skipped = model.logits.save()
    assert not torch.equal(steered, plain) and not torch.equal(skipped, plain)
    torch.testing.assert_close(analysis.compare_streams(model, model, chat(model, images=0)),
                               torch.ones(model.num_layers, dtype=torch.float64))


def test_smolvlm_helpers_take_a_list_of_images_per_prompt(loaded):
    """Two prompts, two images and one: SmolVLM's processor takes them only nested."""
    model = loaded("smolvlm")
    prompts = [chat(model, images=2), chat(model, text="Describe the picture.")]
    images = [[PICTURE, image(30, 60, seed=1)], [OTHER]]
    lens = analysis.logit_lens(model, prompts, images, layers=[1])
    assert [g.row for g in lens.geometry] == [0, 0, 1] and [ids.shape[1] for ids in lens.top_ids] == [20, 12, 20]
    with model.trace(prompts, images=images):
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    for g in lens.geometry:
        assert torch.equal(first[g.row, g.positions], features[g.features])
    seen = analysis.attention_to_images(model, prompts, images, row=1)
    assert [w.shape[-1] for w in seen.weights] == [0, 0, 20]
    nested = analysis.occlusion(model, chat(model, images=2), [images[0]], image=1, batch=16)
    flat = analysis.occlusion(model, chat(model, images=2), images[0], image=1, batch=16)
    assert nested.scores.shape == (12,) and torch.equal(nested.scores, flat.scores)
