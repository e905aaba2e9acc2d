"""The helpers of `vlreg.analysis` on every built-in family, checked against what the
model itself computes."""

from __future__ import annotations

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable, analysis
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "llava_interleave", "llava_1_5", "llava_next")


PICTURE, OTHER = image(112, 84), image(112, 84, seed=7)


@pytest.mark.parametrize("name", FAMILIES)
def test_the_lens_after_the_last_block_is_the_models_readout(loaded, name):
    model = loaded(name)
    lens = analysis.logit_lens(model, chat(model), [PICTURE], top=3, target=5)
    (geometry,) = lens.geometry
    with model.trace(chat(model), images=[PICTURE]):
        logits = model.logits.save()
    readout = logits[geometry.row, geometry.positions].float().softmax(-1)
    assert lens.layers == tuple(range(model.num_layers))
    assert lens.top_ids[0].shape == lens.top_probabilities[0].shape == (model.num_layers, geometry.tokens, 3)
    best = readout.topk(3, dim=-1)
    assert torch.equal(lens.top_ids[0][-1], best.indices)
    torch.testing.assert_close(lens.top_probabilities[0][-1], best.values)
    torch.testing.assert_close(lens.target_probabilities[0][-1], readout[:, 5])
    assert len(lens.top_tokens(model.tokenizer)) == geometry.tokens


def test_the_lens_splits_per_image(loaded):
    model = loaded("qwen2_vl")
    lens = analysis.logit_lens(model, chat(model, images=2), [PICTURE, image(56, 56)], layers=[1])
    assert [ids.shape[1] for ids in lens.top_ids] == [g.tokens for g in lens.geometry] == [12, 4]
    with pytest.raises(ValueError, match="not one"):
        analysis.logit_lens(model, chat(model), [PICTURE], target="What is in")


@pytest.mark.parametrize("name", FAMILIES)
def test_ablating_an_image_changes_the_logits_and_the_mean_is_the_mean(loaded, name):
    model = loaded(name)
    prompt = chat(model)
    zeroed = analysis.ablate_image(model, prompt, [PICTURE])
    assert zeroed.effect.abs().max() > 0 and (zeroed.received == 0).all()
    mean = analysis.ablate_image(model, prompt, [PICTURE], mode="mean")
    (geometry,) = mean.geometry
    with model.trace(prompt, images=[PICTURE]):
        features = model.vision.image_features.save()
    assert mean.effect.abs().max() > 0
    assert torch.equal(mean.received, features[geometry.features].mean(0).expand_as(mean.received))


def test_ablating_some_tokens_leaves_the_others(loaded):
    model = loaded("qwen2_vl")
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 56)]
    with model.trace(prompt, images=pictures):
        features = model.vision.image_features.save()
    done = analysis.ablate_image(model, prompt, pictures, image=1, tokens=[0, 2], mode=torch.ones(model.hidden_size))
    own = features[done.geometry[1].features]
    assert (done.received[[0, 2]] == 1).all() and torch.equal(done.received[[1, 3]], own[[1, 3]])
    with pytest.raises(ValueError, match="mode is"):
        analysis.ablate_image(model, prompt, pictures, mode="blur")


def test_occlusion_scores_each_token(loaded):
    model = loaded("llava_interleave")
    found = analysis.occlusion(model, chat(model), [PICTURE])
    assert found.scores.shape == (16,) and found.scores.abs().max() > 0
    torch.testing.assert_close(analysis.occlusion(model, chat(model), [PICTURE], batch=5).scores, found.scores)
    single = analysis.ablate_image(model, chat(model), [PICTURE], tokens=[3], mode="mean")
    torch.testing.assert_close(found.scores[3], -single.effect[found.target])


@pytest.mark.parametrize("name", FAMILIES)
def test_patching_an_image_with_itself_changes_nothing(loaded, name):
    model = loaded(name)
    same = analysis.patch_image(model, chat(model), [PICTURE], [PICTURE])
    assert same.effects.shape == (model.num_layers,) and (same.effects == 0).all()
    assert same.clean == same.source


def test_patching_each_token_with_itself_changes_nothing(loaded):
    model = loaded("qwen2_vl")
    same = analysis.patch_image(model, chat(model, images=2), [OTHER, PICTURE], [OTHER, PICTURE], image=1, per_token=True, batch=5)
    assert same.effects.shape == (model.num_layers, 12) and (same.effects == 0).all()


def test_patching_another_image_moves_the_logit_until_the_last_block(loaded):
    """After the last block, the image tokens' stream reaches no other token's logits."""
    model = loaded("qwen2_5_vl")
    other = analysis.patch_image(model, chat(model), [PICTURE], [OTHER], per_token=True)
    assert other.effects.shape == (model.num_layers, 12)
    assert other.effects[0].abs().max() > 0 and (other.effects[-1] == 0).all()
    whole = analysis.patch_image(model, chat(model), [PICTURE], [OTHER], layers=[0], target=other.target)
    assert whole.effects.shape == (1,) and whole.effects[0] != 0
    with pytest.raises(ValueError, match="token grid differs"):
        analysis.patch_image(model, chat(model), [PICTURE], [image(56, 56)])


@pytest.mark.parametrize("name", ("qwen2_vl", "llava_next"))
def test_attention_to_images_is_the_patterns_row(loaded, name):
    model = loaded(name)
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 56)]
    found = analysis.attention_to_images(model, prompt, pictures, position=-2)
    with model.trace(prompt, images=pictures):
        pattern = model.layers[1].self_attn.attention_probabilities.save()
    for weights, geometry in zip(found.weights, found.geometry):
        assert weights.shape == (model.num_layers, model.num_heads, geometry.tokens)
        torch.testing.assert_close(weights[1], pattern[0, :, -2, geometry.positions].float())
    assert (found.mass() > 0).all() and (found.mass() < 1).all()


def test_attention_to_images_needs_eager(loaded):
    model = loaded("qwen2_vl", attn_implementation="sdpa")
    with pytest.raises(Unavailable, match="attn_implementation='eager'"):
        analysis.attention_to_images(model, chat(model), [PICTURE])


@pytest.mark.parametrize("name", ("qwen2_vl", "qwen2_5_vl"))
def test_qwen_tower_patterns_fold_merge_blocks(loaded, name):
    model = loaded(name)
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 112)]
    for layer in range(model.vision.num_layers):
        found = analysis.tower_patterns(model, prompt, pictures, layer=layer)
        for pattern, geometry in zip(found.patterns, found.geometry):
            assert pattern.shape == (model.vision.num_heads, geometry.tokens, geometry.tokens)
            torch.testing.assert_close(pattern.sum(-1), torch.ones(pattern.shape[:2]))
    if name == "qwen2_vl":
        attention = model.vision.layers[0].self_attn
        with model.trace(prompt, images=pictures):
            bounds = attention.inputs[1]["cu_seqlens"].save()
            q, k = attention.attention_queries.save(), attention.attention_keys.save()
        first = attention.patterns(q.float(), k.float(), bounds)[0]
        n = found.geometry[0].tokens
        expected = first.reshape(-1, n, 4, n, 4).sum(-1).mean(2)
        torch.testing.assert_close(analysis.tower_patterns(model, prompt, pictures, layer=0).patterns[0], expected)


def test_a_windowed_block_attends_inside_its_window(loaded):
    """Qwen2.5-VL's block 0 attends within 56-pixel windows (2 x 2 tokens); block 1, whole images."""
    model = loaded("qwen2_5_vl")
    picture = image(112, 112)
    windowed = analysis.tower_patterns(model, chat(model), [picture], layer=0).patterns[0]
    full = analysis.tower_patterns(model, chat(model), [picture], layer=1).patterns[0]
    rows, columns = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    window = (rows // 2 * 2 + columns // 2).reshape(-1)
    apart = window[:, None] != window[None, :]
    assert (windowed[:, apart] == 0).all() and (windowed[:, ~apart] > 0).all()
    assert (full > 0).all()


@pytest.mark.parametrize("name", ("llava_interleave", "llava_1_5", "llava_next"))
def test_tower_patterns_are_the_towers_probabilities(loaded, name):
    model = loaded(name)
    found = analysis.tower_patterns(model, chat(model), [PICTURE], layer=1)
    with model.trace(chat(model), images=[PICTURE]):
        pattern = model.vision.layers[1].self_attn.attention_probabilities.save()
    extra = 0 if name == "llava_interleave" else 1  # CLIP's CLS row
    torch.testing.assert_close(found.patterns[0], pattern[0, :, extra:, extra:].float())
    grid = found.geometry[0].grids[found.grids[0]]
    assert (grid.rows, grid.columns) == (4, 4) and grid.label in ("image", "base")
    assert found.from_token(0, 5).shape == (16,)


def test_tower_patterns_read_the_row_of_the_grid_drawn_and_leave_out_trailing_tokens():
    """A tower that runs each of an image's grids as a row (Llama 4's tiles, then its
    global image) is read at the row of the grid drawn, the first wholly over the image,
    and the class token it appends after the patches (`Vision.trailing_tokens`) is left
    out: a tall strip's first tile holds padding, so the global image (row 4) is drawn."""
    model = StandardizedTransformer(str(build("llama4")), task="image-text-to-text", dispatch=True, device="cpu",
                                    attn_implementation="eager", dtype=torch.bfloat16)
    assert (model.vision.class_tokens, model.vision.trailing_tokens) == (0, 1)
    for size, grid in (((112, 84), 0), ((10, 200), 4)):
        found = analysis.tower_patterns(model, chat(model), [image(*size)], layer=1)
        with model.trace(chat(model), images=[image(*size)]):
            pattern = model.vision.layers[1].self_attn.attention_probabilities.save()
        assert pattern.shape[0] == 5 and found.grids == [grid] and found.geometry[0].grids[grid].covered.all()
        torch.testing.assert_close(found.patterns[0], analysis.attention.fold(pattern[grid, :, :16, :16].float(), 2, 2, 2))


def test_a_packed_tower_serves_a_pattern_per_image_and_tower_patterns_draws_each():
    """Pixtral packs every image into one row and attends within each image
    (`PackedVisionAttention`): its pattern is a list, one [heads, n, n] per image, each
    the softmax of that image's own scores (nothing of the row lies outside the blocks),
    an in-place edit of one image's pattern reaches only that image's features, and
    `tower_patterns` draws each image's."""
    model = StandardizedTransformer(str(build("mistral3")), task="image-text-to-text", dispatch=True,
                                    attn_implementation="eager", device="cpu")
    pictures = [image(112, 84), image(64, 128, seed=1)]  # 6 x 8 and 8 x 4 patches
    prompt = chat(model, images=2)
    with model.trace(prompt, images=pictures):
        scores = model.vision.layers[0].self_attn.attention_scores.save()
        pattern = model.vision.layers[0].self_attn.attention_probabilities.save()
        clean = model.vision.image_features.save()
    assert [tuple(one.shape) for one in pattern] == [(4, 48, 48), (4, 32, 32)]
    for one, before in zip(pattern, scores):
        torch.testing.assert_close(one, before.softmax(-1))
        torch.testing.assert_close(one.sum(-1), torch.ones(one.shape[:-1]))
    with model.trace(prompt, images=pictures):
        model.vision.layers[-1].self_attn.attention_probabilities[1][:] = 0  # the second image's only
        features = model.vision.image_features.save()
    geometry = model.vision.geometry(prompt, pictures)
    first, second = geometry[0].features, geometry[1].features
    assert torch.equal(features[first], clean[first]) and not torch.equal(features[second], clean[second])
    found = analysis.tower_patterns(model, prompt, pictures, layer=0)
    for one, grid, drawn in zip(pattern, (geometry[0].grids[0], geometry[1].grids[0]), found.patterns):
        torch.testing.assert_close(drawn, analysis.attention.fold(one.float(), grid.rows, grid.columns, 2))


def test_a_skipped_block_returns_what_the_block_returns():
    """A block whose forward returns a tuple, the stream first (Chameleon's, whose text model
    reads element 0: `Layer.returns_tuple`), returns a tuple when it is skipped too: with
    every block skipped, the logits are the readout of the stream entering the first,
    which the model's own suppression of its image codes' logits holds in."""
    model = StandardizedTransformer(str(build("chameleon")), task="image-text-to-text", dispatch=True, device="cpu")
    prompt = "What is in this image?<image>"
    assert model.layers[0].returns_tuple and model.layers[0].passed_through("stream") == ("stream",)
    with model.trace(prompt, images=[image(112, 84)]):
        entering = model.layers[0].input.save()
    with model.trace(prompt, images=[image(112, 84)]):
        analysis.skip_layers(model, 0, model.num_layers - 1)
        logits = model.logits.save()
    torch.testing.assert_close(logits, analysis.project_on_vocab(model, entering))
    assert (logits[..., list(model.family.suppressed_tokens)] == torch.finfo(logits.dtype).min).all()
