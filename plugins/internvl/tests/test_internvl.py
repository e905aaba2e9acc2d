"""What InternVL promises beyond the conformance suite: the chat format, the layer-scaled
tower blocks, the pixel shuffle's patch -> token map (the grids' ``fold``), the tower's
pattern on tokens. Every analysis helper runs in ``test_conformance.py``.

Then the plugin as a distribution: what it claims, that InternVL's text models it does not
claim come from the plugins that do (nothing imported), and that it serves
InternVL3.5-MoE with no other family installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

from vlreg import StandardizedTransformer, analysis
from vlreg.core.host import plugins
from vlreg.plugin import Claim
from vlreg.testing import build, chat
from vlreg.testing.conformance import image
from vlreg_internvl import plugin

CHECKPOINT = "internvl"

PICTURE = image(112, 84)  # 2 x 2 tiles and the thumbnail: 5 crops of 16 tokens


def test_chat_template_gives_internvls_format(model):
    prompt = chat(model)
    assert prompt == "<|im_start|>user\n<IMG_CONTEXT>\nWhat is in this image?<|im_end|>\n<|im_start|>assistant\n"
    ids = model.processor(text=prompt, images=[PICTURE], return_tensors="pt")["input_ids"][0]
    tokens = model.tokenizer.convert_ids_to_tokens(ids.tolist())
    start = tokens.index("<img>")
    assert tokens[start + 1 : start + 81] == ["<IMG_CONTEXT>"] * 80 and tokens[start + 81] == "</img>"


def test_parts_and_sizes(model):
    assert model.family.name == "internvl"
    assert model.family.parts["text"].model_type == "qwen2"
    assert model.family.served_by("text") == "llava"  # reused by claim, nothing imported
    vision = model.vision
    assert (vision.class_tokens, vision.patch_size, vision.image_size, vision.num_layers) == (1, 7, 56, 2)
    assert vision.patch_embed.weight.shape[-1] == vision.patch_size
    with model.trace(chat(model), images=[PICTURE]):
        patches = vision.patch_embeddings.save()
        tower = vision.tower_output.save()
    assert patches.shape == (5, 64, vision.vision_hidden_size)
    assert tower.shape == (5, 65, vision.vision_hidden_size)  # the class token, then the patches


def test_a_sublayer_adds_its_output_times_its_layer_scale(model):
    """The block's lambdas scale what each sublayer adds; the modules' own outputs are
    before them."""
    block = model.vision.layers[0]
    with model.trace(chat(model), images=[PICTURE]):
        attention = block.self_attn.output.save()
        added = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
    torch.testing.assert_close(added, block._module.lambda_1 * attention[0])
    torch.testing.assert_close(mlp_added, block._module.lambda_2 * mlp)
    assert not torch.allclose(added, attention[0])


def test_the_pixel_shuffle_folds_each_2x2_block_of_patches_into_a_token(model):
    """Token (i, j) of a tile is its patches (2i + di, 2j + dj) side by side, in that
    order, after the class token is dropped: what ``ImageGrid.fold = 2`` declares."""
    with model.trace(chat(model), images=[PICTURE]):
        tower = model.vision.tower_output.save()
        fed = model.projector.input.save()
    grid = model.vision.geometry(chat(model), [PICTURE])[0].grids[0]
    assert (grid.rows, grid.columns, grid.fold) == (4, 4, 2)
    patches = tower[:, 1:].reshape(5, 8, 8, -1)
    for i in range(4):
        for j in range(4):
            expected = torch.cat([patches[:, 2 * i + di, 2 * j + dj] for di in (0, 1) for dj in (0, 1)], -1)
            assert torch.equal(fed[:, 4 * i + j], expected), (i, j)


def test_the_tiles_then_the_thumbnail_fill_the_image_tokens_in_order(model):
    """The projector's rows are the crops' tokens in crop order, and the grids name the
    crops in that order: four tiles, then the thumbnail."""
    with model.trace(chat(model), images=[PICTURE]):
        projected = model.projector.output.save()
        features = model.vision.image_features.save()
    (geometry,) = model.vision.geometry(chat(model), [PICTURE])
    assert [g.label for g in geometry.grids] == ["tile 0,0", "tile 0,1", "tile 1,0", "tile 1,1", "thumbnail"]
    assert geometry.tokens == 80 and {g.tokens for g in geometry.grids} == {16}
    for crop, grid in enumerate(geometry.grids):
        assert torch.equal(features[geometry.span(crop)], projected[crop])


def _by_hand(queries: torch.Tensor, keys: torch.Tensor, crop: int) -> torch.Tensor:
    """Crop ``crop``'s pattern over its 4 x 4 tokens, from the queries and keys: softmax of
    the scaled scores over the class token and 64 patches, the class token's row and
    column left out, then each token's 4 query rows averaged and 4 key columns summed."""
    q, k = queries[crop].double(), keys[crop].double()
    pattern = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(-1)[:, 1:, 1:]
    members = [[(2 * (t // 4) + di) * 8 + 2 * (t % 4) + dj for di in (0, 1) for dj in (0, 1)] for t in range(16)]
    folded = torch.zeros(pattern.shape[0], 16, 16, dtype=torch.float64)
    for a in range(16):
        for b in range(16):
            folded[:, a, b] = pattern[:, members[a]][:, :, members[b]].sum(-1).mean(-1)
    return folded


def test_tower_patterns_fold_the_pattern_onto_the_tokens(model):
    attention = model.vision.layers[1].self_attn
    with model.trace(chat(model), images=[PICTURE]):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    found = analysis.tower_patterns(model, chat(model), [PICTURE], layer=1)
    assert found.grids == [0] and found.geometry[0].grids[0].label == "tile 0,0"  # crop 0
    torch.testing.assert_close(found.patterns[0].double(), _by_hand(queries, keys, 0), rtol=1e-4, atol=1e-6)
    assert (found.patterns[0].sum(-1) < 1).all(), "the class token's share is left out"

    small = [image(40, 40, seed=1), image(48, 44, seed=2)]  # one tile each: crop i is image i
    with model.trace(chat(model, images=2), images=small):
        queries = attention.attention_queries.save()
        keys = attention.attention_keys.save()
    found = analysis.tower_patterns(model, chat(model, images=2), small, layer=1)
    for index in (0, 1):
        torch.testing.assert_close(found.patterns[index].double(), _by_hand(queries, keys, index), rtol=1e-4, atol=1e-6)


def test_vision_feature_layer_other_than_the_last_makes_later_values_read_only(tmp_path):
    """Built lazily: what is read-only is known from the config."""
    folder = build("internvl", tmp_path / "minus2", vision_feature_layer=-2)
    lazy = StandardizedTransformer(str(folder), task="image-text-to-text", dispatch=False)
    rows = lazy.read_only()
    assert "edit vision.layers[0].layer_output" in rows["vision.tower_output"]
    assert any(row.startswith("vision.layers.1.") for row in rows)
    assert not any(row.startswith("vision.layers.0.") for row in rows)


CLAIMS = {Claim("wrapper", "internvl"), Claim("vision", "internvl_vision"), Claim("text", "qwen3_moe"),
          Claim("wrapper", "qianfan_ocr"), Claim("vision", "qianfan_ocr_vision")}


def test_claims_are_held():
    assert set(plugin.vlreg_claims()) == CLAIMS
    held = plugins.claims()
    for claim in CLAIMS:
        assert held[(claim.kind, claim.model_type)] is plugin
    assert plugins.distribution(plugin).name == "vlreg-internvl"


def test_internvl3_5s_qwen3_text_comes_from_the_plugin_that_claims_it():
    """InternVL3.5's dense checkpoints pair the InternViT with Qwen3, claimed by another
    plugin (vlreg-text): served from there, and the image reaches its blocks."""
    model = StandardizedTransformer(str(build("internvl3_5")), task="image-text-to-text", dispatch=True, device="cpu")
    assert model.family.parts["text"].model_type == "qwen3"
    assert model.family.plugins["text"] is plugins.claims()[("text", "qwen3")] is not plugin
    with model.trace(chat(model), images=[image(112, 84)]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
    assert torch.equal(first[mask], features) and features.shape[0] == 80


ALONE = textwrap.dedent(
    """
    import tempfile, warnings
    warnings.simplefilter("ignore")
    from vlreg import NoFamily, StandardizedTransformer
    from vlreg.core.host import plugins
    from vlreg.testing import build, chat
    from vlreg.testing.conformance import image

    assert [name for name, _ in plugins.plugin_manager().list_name_plugin()] == ["internvl"]
    with tempfile.TemporaryDirectory() as folder:
        model = StandardizedTransformer(str(build("internvl3_5_moe", folder)),
                                        task="image-text-to-text", dispatch=True, device="cpu")
        with model.trace(chat(model), images=[image(112, 84)]):
            mask = model.vision.image_token_mask.save()
            features = model.vision.image_features.save()
            first = model.layers[0].input.save()
        assert (first[mask] == features).all() and features.shape[0] == 80
        try:
            StandardizedTransformer(str(build("internvl", folder + "/qwen2")), task="image-text-to-text")
        except NoFamily as error:
            assert "qwen2" in str(error), error
        else:
            raise AssertionError("a Qwen2 text part loaded with no plugin serving it")
    print("alone ok")
    """
)


def test_works_with_no_other_family_installed():
    env = {**os.environ, "VLREG_LOAD_PLUGINS": "internvl"}
    done = subprocess.run([sys.executable, "-c", ALONE], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "alone ok" in done.stdout
