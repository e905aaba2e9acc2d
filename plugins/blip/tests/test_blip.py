"""What the suite cannot say generically about BLIP: the configurations refused before
loading, and ``generate``, where the wrappers run their own steps outside their forward."""

import pytest
import torch

from vlreg import StandardizedTransformer, Unavailable
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "blip-2"


@pytest.mark.parametrize("text, match", [
    ({"model_type": "t5", "d_model": 64, "num_layers": 1, "num_heads": 2}, "encoder-decoder.*decoder-only language model"),
    ({"model_type": "opt", "do_layer_norm_before": False}, "norms after each sublayer"),
    ({"model_type": "opt", "hidden_size": 64, "word_embed_proj_dim": 32}, "projects them in and out"),
])
def test_unserved_text_models_are_refused_from_the_config(tmp_path, text, match):
    """BLIP-2 over Flan-T5 (an encoder-decoder), and OPT's post-norm and projected variants,
    are named and refused before any weight is read (the folder holds none)."""
    from transformers import Blip2Config

    Blip2Config(text_config=text).save_pretrained(tmp_path)
    with pytest.raises(LookupError, match=match):
        StandardizedTransformer(str(tmp_path), task="image-text-to-text")


def test_a_text_generation_load_is_refused_naming_the_task():
    for dispatch in (True, False):
        with pytest.raises(ValueError, match="runs its vision tower on every forward.*task='image-text-to-text'"):
            StandardizedTransformer(str(build("blip-2")), dispatch=dispatch)


def test_generate_reads_the_features_at_the_projector(model):
    """The wrapper's ``generate`` runs the tower, the Q-Former and the projector itself and
    steps the text model: the features at its first step are the trace's, and the model's
    inputs (the image-token mask) are refused by name, not waited for."""
    prompt, pictures = chat(model), [image(112, 84)]
    with model.trace(prompt, images=pictures):
        traced = model.vision.image_features.save()
    first = []
    with model.generate(prompt, images=pictures, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for _ in tracer.iter[0:1]:
            first.append(model.vision.image_features.save())
        ids = tracer.result.save()
    torch.testing.assert_close(first[0], traced)
    assert ids.shape[-1] >= 2
    with pytest.raises(Unavailable, match="never calls its own forward"):
        with model.generate(prompt, images=pictures, max_new_tokens=1, do_sample=False):
            model.vision.image_token_mask.save()


def test_a_placeholder_in_the_prompt_is_refused(model):
    """The processor writes the image's ``<image>`` tokens itself, before the prompt."""
    with pytest.raises(ValueError, match="writes each image's placeholders itself"):
        with model.trace("<image>" + chat(model), images=[image(56, 56)]):
            model.logits.save()
