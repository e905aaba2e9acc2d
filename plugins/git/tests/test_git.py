"""What is particular to GIT beyond the conformance suite: the image's tokens are a prefix the
forward puts before the prompt (`vlreg.plugin.Prefix`), the readout is the root's ``output``,
and its embeddings add the positions into the looked-up rows in place."""

from __future__ import annotations

import pytest
import torch

from vlreg.testing.conformance import image
from vlreg.testing.kit import load

PROMPT = "What is in this image?"


@pytest.fixture(scope="module")
def model():
    return load("git")


def test_the_image_tokens_come_first_and_every_block_spans_them(model):
    with model.trace(PROMPT, images=[image(112, 84)]):
        ids = model.input_ids.save()
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        out = model.layers[-1].layer_output.save()
        logits = model.logits.save()
    prefix = 1 + (28 // 14) ** 2  # a class token and 2 x 2 patches
    assert mask.shape == (1, prefix + ids.shape[1]) == out.shape[:2] == logits.shape[:2]
    assert mask[0, :prefix].all() and not mask[0, prefix:].any()
    assert features.shape == (prefix, model.hidden_size)


def test_a_prompt_without_an_image_has_no_prefix(model):
    with model.trace(PROMPT):
        ids = model.input_ids.save()
        mask = model.vision.image_token_mask.save()
        logits = model.logits.save()
    assert mask.shape == ids.shape and not mask.any() and logits.shape[1] == ids.shape[1]


def test_prompts_and_images_one_each_or_refused_before_the_model_runs(model):
    with pytest.raises(ValueError, match="one image per prompt"):
        with model.trace(PROMPT, images=[image(112, 84), image(64, 64)]):
            model.logits.save()
    with pytest.raises(ValueError, match="one image per prompt"):
        with model.trace() as tracer:
            with tracer.invoke(PROMPT, images=[image(112, 84)]):
                model.logits.save()
            with tracer.invoke("A prompt without an image"):
                pass


def test_the_token_embeddings_stay_as_looked_up_and_an_edit_lands(model):
    """The embeddings add the positions into the looked-up rows in place: the rows served stay
    as looked up, and an edit of them reaches block 0 (the positions added and normed after)."""
    with model.trace(PROMPT, images=[image(112, 84)]):
        ids = model.input_ids.save()
        rows = model.token_embeddings.save()
    assert torch.equal(rows, model.embed_tokens._module(ids))
    with model.trace(PROMPT, images=[image(112, 84)]):
        mask = model.vision.image_token_mask.save()
        model.token_embeddings[:] = 0
        first = model.layers[0].input.save()
    embeddings = model._module.git.embeddings
    expected = embeddings.LayerNorm(embeddings.position_embeddings.weight[: ids.shape[1]])
    torch.testing.assert_close(first[~mask], expected)


def test_the_readout_is_the_roots_output_alone(model):
    assert model.lm_head._module is model._module.output
    assert all("lm_head" not in block.__dict__ and "lm_head" not in block.self_attn.__dict__ for block in model.layers)
