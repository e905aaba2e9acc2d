"""Several invokes in one trace, images included: each invoke's values are its solo run's.

The batch is padded on the left, so an invoke's row holds its solo run's positions at its
right end; values there agree with the solo run (exactly where the arithmetic is the
same, within 1e-4 of the value's scale where padding changes the positions a block sees
or the shapes a matrix product runs on).
"""

from __future__ import annotations

import pytest
import torch

from vlreg import Unavailable
from vlreg.testing import chat
from vlreg.testing.conformance import image

# PaliGemma is served too, with its own test (its processor refuses the text-only case here).
CHECKPOINTS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "llava_interleave", "llava_1_5", "llava_next",
            "llava_onevision", "internvl", "qwen3_5_moe", "gemma3", "gemma4", "gemma4_unified", "idefics2", "idefics3", "smolvlm", "aria",
            "nemotron_h_omni", "mistral3")
TOLERANCE = 1e-4


def close(value, want):
    """Equal up to ``TOLERANCE`` of ``want``'s largest magnitude (a deep block's stream
    grows large, and padding's rounding grows with it)."""
    scale = max(1.0, want.abs().max().item())
    torch.testing.assert_close(value, want, atol=TOLERANCE * scale, rtol=TOLERANCE)


def cases(model):
    """Different image sizes, prompt lengths and image counts, and a prompt with none."""
    return [
        (chat(model), [image(112, 84)]),
        (chat(model, images=0, text="The quick brown fox jumps over the lazy dog."), []),
        (chat(model, images=2, text="Describe the picture."), [image(56, 112, seed=1), image(84, 84, seed=2)]),
    ]


def read(model, images):
    """What an invoke reads, in forward order: the mask, the features (with images), then
    the text model's values."""
    mask = model.vision.image_token_mask.save()
    features = model.vision.image_features.save() if images else None
    later = [model.layers[0].input.save(), model.layers[-1].layer_output.save(), model.logits.save()]
    return [mask, *later], features


def solo(model, prompt, images):
    options = {"images": images} if images else {}
    found: list = []
    with torch.no_grad(), model.trace(prompt, **options):
        found.append(read(model, images))
    return found[0]


def test_each_invoke_gets_its_solo_runs_values(model):
    runs = cases(model)
    batched: list = []  # made outside the trace: names first bound inside one do not leave it
    with torch.no_grad(), model.trace() as tracer:
        for prompt, images in runs:
            options = {"images": images} if images else {}
            with tracer.invoke(prompt, **options):
                batched.append(read(model, images))
    for (prompt, images), (got, got_features) in zip(runs, batched):
        expected, expected_features = solo(model, prompt, images)
        mask, *values = got
        seq = expected[0].shape[1]
        assert mask.shape[0] == 1 and not mask[0, :-seq].any()
        assert torch.equal(mask[:, -seq:], expected[0])
        for value, want in zip(values, expected[1:]):
            close(value[:, -seq:], want)
        if images:
            close(got_features, expected_features)


def test_an_edit_in_one_invoke_stays_in_its_rows(model):
    (first, first_images), (second, _), _ = cases(model)
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(first, images=first_images):
            model.vision.image_features[:] = 0
            ablated = model.logits.save()
        with tracer.invoke(second):
            untouched = model.logits.save()
    with torch.no_grad(), model.trace(first, images=first_images):
        model.vision.image_features[:] = 0
        expected = model.logits.save()
    seq = expected.shape[1]
    close(ablated[:, -seq:], expected)
    with torch.no_grad(), model.trace(second):
        plain = model.logits.save()
    close(untouched[:, -plain.shape[1]:], plain)


def test_tower_values_belong_to_the_one_invoke_with_images_or_are_refused(model):
    (first, first_images), (second, _), (third, third_images) = cases(model)
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(first, images=first_images):
            tower = model.vision.tower_output.save()
        with tracer.invoke(second):
            pass
    with torch.no_grad(), model.trace(first, images=first_images):
        expected = model.vision.tower_output.save()
    close(tower, expected)
    with pytest.raises(Unavailable, match="this invoke's prompts carry no images"):
        with torch.no_grad(), model.trace() as tracer:
            with tracer.invoke(first, images=first_images):
                pass
            with tracer.invoke(second):
                model.vision.tower_output.save()
    with pytest.raises(Unavailable, match="images in several invokes run through the tower together"):
        with torch.no_grad(), model.trace() as tracer:
            with tracer.invoke(first, images=first_images):
                model.vision.tower_output.save()
            with tracer.invoke(third, images=third_images):
                pass
