"""A module called once per crop, served every call (`vlreg.plugin.PerCall`), and root
sizes read off the modules, on a tiny LFM2-VL (vlreg-lfm2-vl).

LFM2-VL's wrapper runs its projector once per crop (the tiles, then a thumbnail) in a
loop, and its text model's MLPs are wider or narrower than ``intermediate_size`` says
where the config sets ``block_auto_adjust_ff_dim``. The checkpoint is built on disk and
loaded through ``from_pretrained``."""

from __future__ import annotations

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image
from vlreg.testing.conformance.trust import _calls


@pytest.fixture(scope="module")
def model():
    return StandardizedTransformer(str(build("lfm2_vl")), task="image-text-to-text", dispatch=True, device="cpu",
                                   attn_implementation="eager")


def prompt(model) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


PICTURE = image(112, 84)


def test_the_projector_runs_once_per_crop_and_serves_every_call(model):
    counts = _calls(model, (prompt(model),), {"images": [PICTURE]})
    crops = counts[model.projector]
    assert crops > 1, "the tiny image is not cut into crops: the test would not reach a second call"
    with model.trace(prompt(model), images=[PICTURE]):
        outputs = model.projector.output.save()
        features = model.vision.image_features.save()
    assert isinstance(outputs, list) and len(outputs) == crops
    assert torch.equal(torch.cat([out.reshape(-1, out.shape[-1]) for out in outputs]), features)


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


def test_root_sizes_are_the_modules_where_the_config_differs(model):
    """``block_auto_adjust_ff_dim`` makes each MLP 2/3 of ``intermediate_size`` wide."""
    config = model._module.config.text_config
    assert model.layers[0].mlp.intermediate_size == model.layers[0].mlp.w1.out_features == int(2 * config.intermediate_size / 3)
    assert model.intermediate_size == model.layers[0].mlp.intermediate_size != config.intermediate_size
