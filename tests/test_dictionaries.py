"""`vlreg.dictionaries`: loading a dictionary from plain tensors in either orientation,
JumpReLU, attaching it to a standard value, splicing and editing through it, and its
feature maps on the image's token grid, on Qwen2-VL and LLaVA checkpoints."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from vlreg.dictionaries import Dictionary, feature_maps, selectivity
from vlreg.testing import chat
from vlreg.testing.conformance import image

FAMILIES = ("qwen2_vl", "llava_interleave")
PICTURE = image(112, 84)


def tensors(d_in: int, features: int, seed: int = 0, threshold: bool = False) -> dict:
    g = torch.Generator().manual_seed(seed)
    found = {"W_enc": torch.randn(d_in, features, generator=g) / d_in**0.5, "b_enc": torch.randn(features, generator=g) * 0.1,
             "W_dec": torch.randn(features, d_in, generator=g) / features**0.5, "b_dec": torch.randn(d_in, generator=g) * 0.1}
    if threshold:
        found["threshold"] = torch.rand(features, generator=g) * 0.5
    return found


def random_dictionary(model, site: str, features: int = 48, seed: int = 0) -> Dictionary:
    width = model.vision.vision_hidden_size if site.startswith("vision.layers") else model.hidden_size
    return Dictionary.from_tensors(tensors(width, features, seed)).attach(model, site)


# ---- loading ------------------------------------------------------------------------


def test_both_orientations_and_every_file_kind_load_the_same_dictionary(tmp_path):
    from safetensors.torch import save_file

    made = tensors(16, 40, threshold=True)
    save_file(made, str(tmp_path / "standard.safetensors"))
    linear = {**made, "W_enc": made["W_enc"].T.contiguous(), "W_dec": made["W_dec"].T.contiguous()}
    torch.save(linear, tmp_path / "linear.pt")
    np.savez(tmp_path / "params.npz", **{name: t.numpy() for name, t in made.items()})
    standard = Dictionary.load(tmp_path / "standard.safetensors")
    flipped = Dictionary.load(tmp_path / "linear.pt")
    npz = Dictionary.load(tmp_path / "params.npz")
    assert "W_enc [d_in, features]" in standard.orientation and "nn.Linear" in flipped.orientation
    assert npz.orientation == standard.orientation
    assert repr(flipped).startswith("Dictionary(jumprelu, 40 features over 16-wide values, not attached")
    assert "nn.Linear" in repr(flipped)
    for one in (flipped, npz):
        assert (one.d_in, one.features, one.architecture) == (16, 40, "jumprelu")
        for name in ("W_enc", "b_enc", "W_dec", "b_dec", "threshold"):
            assert torch.equal(getattr(one, name), getattr(standard, name))
    x = torch.randn(5, 16)
    assert torch.equal(flipped.encode(x), standard.encode(x))


def test_a_square_dictionary_asks_for_its_orientation_and_bad_files_are_refused(tmp_path):
    square = tensors(8, 8)
    with pytest.raises(ValueError, match="transposed="):
        Dictionary.from_tensors(square)
    assert torch.equal(Dictionary.from_tensors(square, transposed=True).W_enc, square["W_enc"].T)
    with pytest.raises(ValueError, match="lacks W_dec"):
        Dictionary.from_tensors({k: v for k, v in tensors(8, 4).items() if k != "W_dec"})
    with pytest.raises(ValueError, match="either orientation"):
        Dictionary.from_tensors({**tensors(8, 4), "W_dec": torch.zeros(5, 8)})
    with pytest.raises(ValueError, match="threshold has 3"):
        Dictionary.from_tensors({**tensors(8, 4), "threshold": torch.zeros(3)})
    with pytest.raises(ValueError, match="not '.txt'"):
        (tmp_path / "d.txt").write_text("x")
        Dictionary.load(tmp_path / "d.txt")
    torch.save({**tensors(8, 4), "extra": types.SimpleNamespace(a=1)}, tmp_path / "pickled.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed"):  # an arbitrary object is never unpickled
        Dictionary.load(tmp_path / "pickled.pt")


def test_jumprelu_keeps_a_feature_only_above_its_threshold():
    made = tensors(12, 30, seed=3, threshold=True)
    jump, relu = Dictionary.from_tensors(made), Dictionary.from_tensors({k: v for k, v in made.items() if k != "threshold"})
    x = torch.randn(200, 12)
    pre = x @ made["W_enc"] + made["b_enc"]
    assert torch.equal(relu.encode(x), pre.relu())
    expected = torch.where(pre > made["threshold"], pre, torch.zeros(()))
    torch.testing.assert_close(jump.encode(x), expected)
    between = (pre > 0) & (pre <= made["threshold"])
    assert between.any() and (jump.encode(x)[between] == 0).all() and (relu.encode(x)[between] > 0).all()
    torch.testing.assert_close(jump.decode(jump.encode(x)) + jump.error(x), x)


def test_an_sae_lens_shaped_sae_is_read_by_its_attributes_and_config():
    """What `from_sae` reads off sae-lens's ``SAE``: the five tensors and ``cfg``'s
    architecture, ``apply_b_dec_to_input`` and (TopK) ``k``; nothing else of the object is used."""
    made = tensors(10, 20, seed=5, threshold=True)
    sae = types.SimpleNamespace(**{k: v.clone().requires_grad_() for k, v in made.items()},
                                cfg=types.SimpleNamespace(architecture="jumprelu", apply_b_dec_to_input=True,
                                                          normalize_activations="none"))
    read = Dictionary.from_sae(sae)
    x = torch.randn(7, 10)
    pre = (x - made["b_dec"]) @ made["W_enc"] + made["b_enc"]
    torch.testing.assert_close(read.encode(x), torch.where(pre > made["threshold"], pre, torch.zeros(())))
    standard = types.SimpleNamespace(**made, cfg=types.SimpleNamespace(architecture=lambda: "standard"))
    assert Dictionary.from_sae(standard).architecture == "relu"
    topk = Dictionary.from_sae(types.SimpleNamespace(**made, cfg=types.SimpleNamespace(architecture="topk", k=3)))
    assert (topk.architecture, topk.k) == ("topk", 3) and ((topk.encode(x) != 0).sum(-1) <= 3).all()
    with pytest.raises(ValueError, match="'gated'"):
        Dictionary.from_sae(types.SimpleNamespace(**made, cfg=types.SimpleNamespace(architecture="gated")))
    with pytest.raises(ValueError, match="normalises"):
        Dictionary.from_sae(types.SimpleNamespace(**made, cfg=types.SimpleNamespace(
            architecture="standard", normalize_activations="expected_average_only_in")))


# ---- on a model ---------------------------------------------------------------------


def test_attach_refuses_bad_sites_and_widths_and_takes_the_models_dtype(loaded):
    model = loaded("qwen2_vl")
    made = tensors(model.hidden_size, 16)
    for site, match in (("layers[1].mlp_output", "attaches to one of"), ("layers[9].layer_output", "has 2 blocks"),
                        ("vision.layers[0].layer_output", "reads 64-wide")):
        with pytest.raises(ValueError, match=match.replace("64", str(model.hidden_size))):
            Dictionary.from_tensors(made).attach(model, site)
    with pytest.raises(ValueError, match="not attached"):
        Dictionary.from_tensors(made).rows(model.vision.geometry(chat(model), [PICTURE])[0])
    half = loaded("qwen2_vl", dtype=torch.bfloat16)
    attached = Dictionary.from_tensors(made).attach(half, "layers[-1].input")
    assert attached.W_enc.dtype == attached.W_dec.dtype == torch.bfloat16 and attached.site == "layers[-1].input"
    with pytest.raises(ValueError, match="attach it to the model"):
        attached.encode(torch.randn(3, model.hidden_size))


SITES = ("layers[0].layer_output", "layers[1].input", "vision.image_features", "vision.layers[0].layer_output")


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("site", SITES)
def test_splicing_reconstruction_and_error_back_leaves_the_logits(loaded, name, site):
    model = loaded(name)
    dictionary = random_dictionary(model, site)
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        clean = model.logits.save()
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        x = dictionary.read() if site.startswith("vision.layers") else dictionary.rows(geometry)
        features = dictionary.encode(x)
        x[:] = dictionary.decode(features) + dictionary.error(x, features)
        active = (features > 0).float().mean().save()
        spliced = model.logits.save()
    assert 0 < active < 1
    torch.testing.assert_close(spliced, clean, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", FAMILIES)
def test_zeroing_clamping_and_adding_a_feature_land_through_the_decoder(loaded, name):
    model = loaded(name)
    dictionary = random_dictionary(model, "layers[0].layer_output")
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        before = model.layers[0].layer_output.save()
        clean = model.logits.save()
    features = dictionary.encode(before[geometry.row, geometry.positions])
    feature = int(features.sum(0).argmax())
    for edit, change in (("zero", -features[:, feature]), ("clamp", 3.0 - features[:, feature]),
                         ("add", torch.full((geometry.tokens,), 2.0))):
        with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
            rows = dictionary.rows(geometry)
            getattr(dictionary, edit)(rows, feature, *(() if edit == "zero" else (3.0 if edit == "clamp" else 2.0,)))
            after = model.layers[0].layer_output.save()
            logits = model.logits.save()
        expected = before.clone()
        expected[geometry.row, geometry.positions] += change[:, None] * dictionary.W_dec[feature]
        torch.testing.assert_close(after, expected, atol=1e-5, rtol=1e-5)
        assert (logits - clean).abs().max() > 1e-4, edit


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("site", ("layers[1].layer_output", "vision.image_features", "vision.layers[1].layer_output"))
def test_feature_maps_lie_on_each_images_token_grid(loaded, name, site):
    model = loaded(name)
    dictionary = random_dictionary(model, site)
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 56, seed=3)] if name == "qwen2_vl" else [PICTURE, image(84, 112, seed=3)]
    geometry = model.vision.geometry(prompt, pictures)
    maps = feature_maps(dictionary, prompt, pictures)
    assert len(maps.activations) == 2
    for one, shown in zip(geometry, maps.geometry):
        assert shown.positions.tolist() == one.positions.tolist() and torch.equal(shown.boxes, one.boxes)
        assert shown.size == one.size
    assert [tuple(a.shape) for a in maps.activations] == [(g.tokens, dictionary.features) for g in geometry]
    with torch.no_grad(), model.trace(prompt, images=pictures):
        value = dictionary.read().save()
    if site == "vision.image_features":
        expected = [dictionary.encode(value[g.features]) for g in geometry]
    elif site.startswith("layers"):
        expected = [dictionary.encode(value[g.row, g.positions]) for g in geometry]
    else:  # the tower: each token's patches averaged (Qwen: 2 x 2 merge blocks in order; LLaVA: a patch a token)
        acts = dictionary.encode(value)
        if name == "qwen2_vl":
            expected = list(acts[0].reshape(-1, 4, dictionary.features).mean(1).split([g.tokens for g in geometry]))
        else:
            expected = [acts[i, model.vision.class_tokens:] for i in range(2)]
    for found, wanted in zip(maps.activations, expected):
        torch.testing.assert_close(found, wanted.float(), atol=1e-5, rtol=1e-5)
    x0, y0, x1, y1 = geometry[0].boxes[0].tolist()
    box = (x0, y0, x1 + 1, y1)  # the first token and the one to its right
    inside = maps.tokens_in(box)
    assert inside == [0, 1]
    with pytest.raises(ValueError, match="overlaps the box"):
        maps.top(3, box=(-50, -50, -10, -10))
    top = maps.top(3, box=box)
    assert [f for f, _ in top] == maps.activations[0][inside].mean(0).topk(3).indices.tolist()
    assert maps.top(1, tokens=5)[0][0] == int(maps.activations[0][5].argmax())
    kept = feature_maps(dictionary, prompt, pictures, features=[7, 2])
    torch.testing.assert_close(kept.map(2, image=1), maps.map(2, image=1))
    with pytest.raises(ValueError, match="not kept"):
        kept.map(3)


def test_selectivity_counts_image_and_text_tokens_apart(loaded):
    model = loaded("qwen2_vl")
    dictionary = random_dictionary(model, "layers[0].input")
    prompts = [chat(model), chat(model, images=2)]
    pictures = [[PICTURE], [image(56, 56), PICTURE]]
    found = selectivity(dictionary, prompts, pictures)
    encoding = model.processor(text=prompts, images=pictures, padding=True, return_tensors="pt")
    with torch.no_grad(), model.trace(prompts, images=pictures):
        value = dictionary.read().save()
    acts = dictionary.encode(value)
    image_mask = encoding["input_ids"] == model._module.config.image_token_id
    text_mask = encoding["attention_mask"].bool() & ~image_mask
    torch.testing.assert_close(found.image_rate, (acts[image_mask] > 0).float().mean(0))
    torch.testing.assert_close(found.text_mean, acts[text_mask].mean(0))
    best, score = found.top(1)[0]
    assert score == pytest.approx(float((found.image_rate - found.text_rate).max()))
    assert found.top(1, text=True)[0][1] == pytest.approx(float((found.text_rate - found.image_rate).max()))
    with pytest.raises(ValueError, match="text stream"):
        selectivity(random_dictionary(model, "vision.image_features"), prompts, pictures)


class Allocations(TorchDispatchMode):
    """The shape of every tensor an operation makes."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


def test_encoding_a_448_image_on_16k_features_reads_the_stream_in_place(loaded):
    """256 image tokens of a 448 x 448 image, 16384 features: the rows handed to
    `encode` are the model's own stream (one storage), and encoding makes the
    ``[tokens, features]`` activations but no ``[tokens, d_in]`` copy of the rows
    (subtracting the decoder bias included: it is folded into the encoder's bias)."""
    model = loaded("qwen2_vl", {"pixels": (56 * 56, 448 * 448)})
    dictionary = Dictionary.from_tensors(tensors(model.hidden_size, 16384), subtract_decoder_bias=True)
    dictionary = dictionary.attach(model, "layers[1].layer_output")
    big = image(448, 448)
    prompt = chat(model)
    (geometry,) = model.vision.geometry(prompt, [big])
    assert geometry.tokens == 256
    with torch.no_grad(), model.trace(prompt, images=[big]):
        stream = model.layers[1].layer_output
        rows = dictionary.rows(geometry)
        shared = (rows.untyped_storage().data_ptr() == stream.untyped_storage().data_ptr()) and rows._is_view()
        shared = torch.tensor(shared).save()
        kept = rows.save()
    assert bool(shared)
    with Allocations() as made:
        features = dictionary.encode(kept)
    assert features.shape == (256, 16384)
    assert (256, 16384) in made.shapes
    assert (256, model.hidden_size) not in made.shapes, made.shapes
    with Allocations() as made:
        dictionary.encode(kept.clone() - dictionary.b_dec)  # what subtracting the bias from the rows would make
    assert (256, model.hidden_size) in made.shapes


def test_a_feature_map_is_drawn_over_the_image_hottest_where_the_feature_is(loaded):
    from vlreg.pictures import RAMP, feature_map

    model = loaded("qwen2_vl")
    dictionary = random_dictionary(model, "layers[1].layer_output")
    maps = feature_maps(dictionary, chat(model), [PICTURE])
    feature = int(maps.activations[0].max(0).values.argmax())
    drawn = feature_map(PICTURE, maps, feature, title="", bar=False)   # nothing drawn over the tokens but the map
    assert drawn.size == PICTURE.size
    hottest = int(maps.map(feature).argmax())
    x0, y0, x1, y1 = maps.geometry[0].boxes[hottest].tolist()
    x, y = int(x0 + x1) // 2, int(y0 + y1) // 2
    under = torch.tensor(PICTURE.convert("L").convert("RGB").getpixel((x, y)), dtype=torch.float32)  # a grey copy
    expected = under * 0.45 + torch.tensor(RAMP[-1], dtype=torch.float32) * 0.55
    assert (torch.tensor(drawn.getpixel((x, y)), dtype=torch.float32) - expected).abs().max() <= 1


def test_rows_are_views_or_refused(loaded):
    """`rows` hands out only views, whose edits land: a token or a slice narrows it, a
    list of tokens is refused, and so is an image whose tokens text lies between
    (Idefics3's tiles), while its feature maps, which only read, still gather them."""
    model = loaded("qwen2_vl")
    dictionary = random_dictionary(model, "layers[0].layer_output")
    (geometry,) = model.vision.geometry(chat(model), [PICTURE])
    with torch.no_grad(), model.trace(chat(model), images=[PICTURE]):
        whole = dictionary.rows(geometry)
        one, last, some = dictionary.rows(geometry, 3), dictionary.rows(geometry, -1), dictionary.rows(geometry, slice(2, 5))
        views = torch.tensor([t._base is not None and t.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
                              for t in (one, last, some)]).save()
        shapes = torch.tensor([t.shape[0] for t in (one, last, some)]).save()
        same = torch.equal(last[0], whole[-1])
        same = torch.tensor(same).save()
    assert bool(views.all()) and shapes.tolist() == [1, 1, 3] and bool(same)
    with pytest.raises(ValueError, match="a list would be a copy"):
        with model.trace(chat(model), images=[PICTURE]):
            dictionary.rows(geometry, [1, 2])
    tiled = loaded("idefics3")
    dictionary = random_dictionary(tiled, "layers[0].layer_output")
    prompt = chat(tiled)
    (geometry,) = tiled.vision.geometry(prompt, [PICTURE])
    assert int(geometry.positions[-1] - geometry.positions[0]) + 1 > geometry.tokens
    with pytest.raises(ValueError, match="not consecutive"):
        with tiled.trace(prompt, images=[PICTURE]):
            dictionary.rows(geometry)
    maps = feature_maps(dictionary, prompt, [PICTURE])
    with torch.no_grad(), tiled.trace(prompt, images=[PICTURE]):
        value = tiled.layers[0].layer_output.save()
    torch.testing.assert_close(maps.activations[0], dictionary.encode(value[geometry.row, geometry.positions]))


@pytest.mark.parametrize("name", ("qwen2_vl", "qwen2_5_vl"))
def test_a_tower_blocks_patches_fold_onto_the_token_grid_from_the_towers_order(loaded, name):
    """Qwen2.5-VL's blocks hold the patches in window order: a map on the first block's
    input must equal the same dictionary on `vision.patch_embeddings` (the processor's
    merge-block order, before the windows), each token's 2 x 2 patches averaged."""
    model = loaded(name)
    dictionary = random_dictionary(model, "vision.layers[0].input")
    prompt = chat(model, images=2)
    pictures = [PICTURE, image(56, 112, seed=4)]
    maps = feature_maps(dictionary, prompt, pictures)
    with torch.no_grad(), model.trace(prompt, images=pictures):
        patches = model.vision.patch_embeddings.save()
    tokens = dictionary.encode(patches[0]).reshape(-1, 4, dictionary.features).mean(1)
    expected = tokens.split([g.tokens for g in maps.geometry])
    for found, wanted in zip(maps.activations, expected):
        torch.testing.assert_close(found, wanted, atol=1e-5, rtol=1e-5)


def test_a_cross_attention_family_maps_its_states_and_refuses_stream_rows(loaded):
    """Mllama's image reaches the text model as cross-attention states, not tokens in the
    stream: a dictionary on `vision.image_features` maps each image's positions there
    (and an edit of them lands), one on a block's stream refuses, saying why."""
    from vlreg import Unavailable

    model = loaded("mllama")
    prompt = chat(model)
    states = random_dictionary(model, "vision.image_features")
    (geometry,) = model.vision.geometry(prompt, [PICTURE])
    maps = feature_maps(states, prompt, [PICTURE])
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        value = model.vision.image_features.save()
        clean = model.logits.save()
    assert value.dim() == 3 and maps.activations[0].shape == (geometry.tokens, states.features)
    torch.testing.assert_close(maps.activations[0], states.encode(value[geometry.row, geometry.features]))
    with torch.no_grad(), model.trace(prompt, images=[PICTURE]):
        states.add(states.rows(geometry), 0, 5.0)
        edited = model.logits.save()
    assert (edited - clean).abs().max() > 1e-4
    stream = random_dictionary(model, "layers[0].layer_output")
    with pytest.raises(Unavailable, match="cross-attention"):
        feature_maps(stream, prompt, [PICTURE])
    with pytest.raises(Unavailable, match="cross-attention"):
        selectivity(stream, prompt, [PICTURE])
