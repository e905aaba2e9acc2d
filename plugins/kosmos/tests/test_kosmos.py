"""What is particular to Kosmos-2 beyond the conformance suite: its image tokens are found by
the processor's mask, not an id, and a lazily built model (weights loaded at the first trace)
reads the token embeddings as embedded, though the text model writes the features over them in
place."""

from __future__ import annotations

import pytest
import torch

from vlreg.testing.conformance import image
from vlreg.testing.kit import chat, load


@pytest.fixture(scope="module")
def lazy():
    return load("kosmos-2", dispatch=False)


def test_the_image_token_mask_is_the_processors_and_the_token_embeddings_stay_as_embedded(lazy):
    prompt, pictures = chat(lazy), [image(56, 56)]
    encoding = lazy.processor(text=prompt, images=pictures, return_tensors="pt")
    with lazy.trace(prompt, images=pictures):
        ids = lazy.input_ids.save()
        mask = lazy.vision.image_token_mask.save()
        embeddings = lazy.token_embeddings.save()
        features = lazy.vision.image_features.save()
    assert torch.equal(mask, encoding["image_embeds_position_mask"] == 1)
    assert int(mask.sum()) == features.shape[0] == lazy.config.latent_query_num
    # the ids under the mask are ordinary vocabulary ids, one after another
    assert ids[mask].tolist() == list(range(lazy.tokenizer.unk_token_id + 1, lazy.tokenizer.unk_token_id + 65))
    assert torch.equal(embeddings, lazy.embed_tokens._module(ids))


def test_an_edit_of_the_features_reaches_generation(lazy):
    """Under generate the wrapper steps its text model: the features are read at the first
    step, and zeroing them changes what is generated there."""
    prompt, pictures = chat(lazy), [image(56, 56)]
    with lazy.generate(prompt, images=pictures, max_new_tokens=1):
        plain = lazy.logits.save()
    with lazy.generate(prompt, images=pictures, max_new_tokens=1):
        lazy.vision.image_features[:] = 0
        zeroed = lazy.logits.save()
    assert plain.shape == zeroed.shape and not torch.equal(plain, zeroed)
