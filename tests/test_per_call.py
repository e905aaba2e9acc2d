"""A module called once per crop, served every call (`vlreg.plugin.PerCall`), and root
sizes read off the modules, on a tiny LFM2-VL (vlreg-lfm2-vl).

LFM2-VL's wrapper runs its projector once per crop (the tiles, then a thumbnail) in a
loop on transformers 5.23 (from 5.24 it calls it once, on every crop packed:
`vlreg_lfm2_vl.vision.PER_CROP`), and its text model's MLPs are wider or narrower than
``intermediate_size`` says where the config sets ``block_auto_adjust_ff_dim``. Chameleon's
embedding, called on the prompt's ids and then on the image's codes on every release, is
the module called several times whose every call takes a write. The checkpoints are built
on disk and loaded through ``from_pretrained``."""

from __future__ import annotations

import pytest
import torch
from vlreg_lfm2_vl.vision import PER_CROP

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image
from vlreg.testing.conformance.trust import _calls

CHECKPOINT = "lfm2_vl"

per_crop = pytest.mark.skipif(not PER_CROP, reason="this transformers calls LFM2-VL's projector once, on every crop "
                              "packed (5.24 on): it is no module called per crop there")


def prompt(model) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


PICTURE = image(112, 84)


@per_crop
def test_the_projector_runs_once_per_crop_and_serves_every_call(model):
    counts = _calls(model, (prompt(model),), {"images": [PICTURE]})
    crops = counts[model.projector]
    assert crops > 1, "the tiny image is not cut into crops: the test would not reach a second call"
    with model.trace(prompt(model), images=[PICTURE]):
        outputs = model.projector.output.save()
        features = model.vision.image_features.save()
    assert isinstance(outputs, list) and len(outputs) == crops
    assert torch.equal(torch.cat([out.reshape(-1, out.shape[-1]) for out in outputs]), features)


@per_crop
def test_every_call_of_the_projector_takes_a_write(model):
    """An assignment is a list, one entry per call, each written as its call returns (so
    it is made before the calls are read: their shapes come from an earlier trace)."""
    with model.trace(prompt(model), images=[PICTURE]):
        outputs = model.projector.output.save()
    with model.trace(prompt(model), images=[PICTURE]):
        model.projector.output = [torch.zeros_like(out) for out in outputs]
        features = model.vision.image_features.save()
    assert features.abs().max() == 0
    with pytest.raises(ValueError, match="assign a list"):
        with model.trace(prompt(model), images=[PICTURE]):
            model.projector.output = torch.zeros(1)


def test_every_call_of_an_embedding_called_twice_takes_a_write():
    """Chameleon's embedding reads the prompt's ids, then the image's codes: an assigned
    list writes each call, so zeroed second calls are features of zeros."""
    codes = StandardizedTransformer(str(build("chameleon")), task="image-text-to-text", dispatch=True, device="cpu")
    prompt = "What is in this image?<image>"
    with codes.trace(prompt, images=[PICTURE]):
        calls = codes.embed_tokens.output.save()
    assert isinstance(calls, list) and len(calls) == 2
    with codes.trace(prompt, images=[PICTURE]):
        codes.embed_tokens.output = [calls[0], torch.zeros_like(calls[1])]
        features = codes.vision.image_features.save()
        first = codes.layers[0].input.save()
    assert features.abs().max() == 0 and first.abs().sum() > 0


def test_root_sizes_are_the_modules_where_the_config_differs(model):
    """``block_auto_adjust_ff_dim`` makes each MLP 2/3 of ``intermediate_size`` wide."""
    config = model._module.config.text_config
    assert model.layers[0].mlp.intermediate_size == model.layers[0].mlp.w1.out_features == int(2 * config.intermediate_size / 3)
    assert model.intermediate_size == model.layers[0].mlp.intermediate_size != config.intermediate_size
