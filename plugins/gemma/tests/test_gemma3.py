"""What is particular to Gemma 3, beyond the conformance suite."""

import pytest
import torch

import vlreg_llava
from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image
from vlreg_gemma import plugin

CHECKPOINT = "gemma3"


def prompt(model, *content, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": list(content)})
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def text(words):
    return {"type": "text", "text": words}


def test_the_tower_is_served_by_the_llava_plugin(model):
    assert model.family.name == "gemma"
    assert model.family.plugins == {"wrapper": plugin, "text": plugin, "vision": vlreg_llava.plugin}


def test_the_chat_template_writes_gemma3_turns(model):
    rendered = prompt(model, {"type": "image"}, text("Describe it."), system="Be brief.")
    assert rendered == (
        "<bos><start_of_turn>user\nBe brief.\n\n<start_of_image>Describe it.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_sublayer_outputs_are_read_after_their_post_norms(model):
    block = model.layers[0]
    with model.trace(prompt(model, text("The quick brown fox."))):
        attention = block.self_attn.output[0].save()
        added = block.self_attn.attention_output.save()
        mlp = block.mlp.output.save()
        mlp_added = block.mlp.mlp_output.save()
    torch.testing.assert_close(block.post_attention_layernorm._module(attention), added)
    torch.testing.assert_close(block.post_feedforward_layernorm._module(mlp), mlp_added)
    assert not torch.allclose(attention, added)


def test_scores_are_scaled_by_query_pre_attn_scalar(model):
    config = model._module.config.text_config
    assert config.query_pre_attn_scalar != config.head_dim
    block = model.layers[-1]
    with model.trace(prompt(model, text("The quick brown fox."))):
        queries = block.self_attn.attention_queries.save()
        keys = block.self_attn.attention_keys.save()
        scores = block.self_attn.attention_scores.save()
    keys = keys.repeat_interleave(model.num_heads // model.num_kv_heads, dim=1)
    expected = queries @ keys.transpose(-1, -2) * config.query_pre_attn_scalar**-0.5
    torch.testing.assert_close(scores.tril(), expected.tril())


def test_sliding_blocks_attend_within_their_window(model):
    config = model._module.config.text_config
    assert config.layer_types == ["sliding_attention", "full_attention"]
    window = config.sliding_window
    patterns = []
    with model.trace(prompt(model, text("The Eiffel Tower is in Paris. The capital of France is Paris."))):
        for block in model.layers:
            patterns.append(block.self_attn.attention_probabilities.save())
    sliding, full = patterns
    assert sliding.shape[-1] > window
    assert sliding.tril(-window).abs().max() == 0
    assert full.tril(-window).abs().max() > 0


def test_an_images_tokens_see_each_other_and_the_pattern_says_so(model):
    tower = model.vision
    per_side = tower.image_size // tower.patch_size
    with model.trace(prompt(model, {"type": "image"}, text("What is this?")), images=[image(90, 60)]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.tower_output.save()
        features = model.vision.image_features.save()
        pattern = model.layers[-1].self_attn.attention_probabilities.save()
    assert patches.shape[1] == per_side**2
    assert features.shape[0] == model._module.config.mm_tokens_per_image == int(mask.sum())
    positions = mask[0].nonzero().flatten()
    among_images = pattern[0][:, positions][:, :, positions]
    assert among_images.triu(1).abs().max() > 0, "an image token attends only to earlier ones"
    text_rows = (~mask[0]).nonzero().flatten()
    assert pattern[0].triu(1)[:, text_rows].abs().max() == 0, "a text token attends to a later one"
    assert "the tokens of one image attend to each other" in repr(model.layers[-1].self_attn)


def test_the_pooled_grid_folds_the_towers_pattern_into_tokens(model):
    """Each token is a 2 x 2 block of the tower's 4 x 4 patches (56-pixel images, 14-pixel
    patches, 4 tokens): the tower's pattern folded to tokens keeps each row's sum of 1,
    and is the pattern's block averages (queries) and block sums (keys), computed here by
    hand on the raster of patches."""
    from vlreg import analysis

    picture = image(90, 60)
    chat = prompt(model, {"type": "image"}, text("What is this?"))
    (geometry,) = model.vision.geometry(chat, [picture])
    (grid,) = geometry.grids
    assert (grid.rows, grid.columns, grid.fold) == (2, 2, 2)
    torch.testing.assert_close(grid.boxes[3], torch.tensor([45.0, 30.0, 90.0, 60.0], dtype=torch.float64))
    found = analysis.tower_patterns(model, chat, [picture], layer=-1)
    with model.trace(chat, images=[picture]):
        pattern = model.vision.layers[-1].self_attn.attention_probabilities.save()
    folded = found.patterns[0]
    torch.testing.assert_close(folded.sum(-1), torch.ones(model.vision.num_heads, 4))
    expected = torch.zeros(model.vision.num_heads, 4, 4)
    for query in range(16):
        for key in range(16):
            token_q = (query // 4) // 2 * 2 + (query % 4) // 2  # patch (row, column) -> token, 2 x 2 tokens
            token_k = (key // 4) // 2 * 2 + (key % 4) // 2
            expected[:, token_q, token_k] += pattern[0, :, query, key].float() / 4
    torch.testing.assert_close(folded, expected)


def test_a_grid_that_does_not_say_how_patches_fold_is_refused():
    """Declared as one patch per token, the 16 patches cannot be the 4 tokens: the helper
    refuses rather than slicing the pattern as if 12 patches were class tokens."""
    from attrs import evolve

    from vlreg import Unavailable, analysis, hookimpl
    from vlreg.plugin import Claim
    from vlreg.testing import registered

    class Unfolded:
        @hookimpl
        def vlreg_claims(self):
            return [Claim("wrapper", "gemma3", overrides="gemma")]

        @hookimpl
        def vlreg_rename(self, part):
            return plugin.vlreg_rename(part)

        @hookimpl
        def vlreg_entry(self, part):
            return plugin.vlreg_entry(part)

        @hookimpl
        def vlreg_image_grids(self, part):
            declared = plugin.vlreg_image_grids(part)
            return lambda *arguments: [evolve(grid, fold=1) for grid in declared(*arguments)]

    with registered(Unfolded(), name="unfolded"):
        model = StandardizedTransformer(str(build("gemma3")), task="image-text-to-text", dispatch=True,
                                        device="cpu", attn_implementation="eager")
        chat = prompt(model, {"type": "image"}, text("What is this?"))
        with pytest.raises(Unavailable, match="spans 16 positions, but image 0's grid is 2 x 2 tokens of 1 x 1"):
            analysis.tower_patterns(model, chat, [image(90, 60)])
