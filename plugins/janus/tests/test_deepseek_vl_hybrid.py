"""DeepSeek-VL-Hybrid beyond the conformance suite: its second, high-resolution tower at
``vision.second_tower`` runs on the processor's high-resolution pixels after SigLIP, and what
the aligner reads of it reaches the features; on an sdpa load its attention's interior is
refused by name, before the model runs, and what the attention adds is still served; every load
of a process gets the same envoy classes (a remote request names one by the order it was made in)."""

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.testing import build, chat
from vlreg.testing.conformance import image
from vlreg.testing.conformance.helpers import refused_before_running


@pytest.fixture(scope="module")
def path():
    return str(build("deepseek_vl_hybrid"))


@pytest.fixture(scope="module")
def model(path):
    return StandardizedTransformer(path, task="image-text-to-text", dispatch=True, attn_implementation="eager",
                                   device="cpu")


def test_the_second_tower_reads_the_high_resolution_pixels_and_feeds_the_features(model):
    prompt, pictures = chat(model), [image(112, 84)]
    encoding = model.processor(text=[prompt], images=pictures, return_tensors="pt")
    with model.trace(prompt, images=pictures):
        first = model.vision.second_tower.patch_embeddings.save()
        tower = model.vision.second_tower.tower_output.save()
        features = model.vision.image_features.save()
    with model.trace(prompt, images=pictures):
        model.vision.second_tower.tower_output[:] = 0
        zeroed = model.vision.image_features.save()
    side = encoding["high_res_pixel_values"].shape[-1] // model.vision.second_tower.patch_size
    assert first.shape == (1, side * side, model.vision.second_tower.vision_hidden_size)
    assert tower.shape == (1, side * side, model.vision.second_tower.output_channels)
    assert features.shape == zeroed.shape and not torch.allclose(features, zeroed)
    assert "second_tower" in model.vision.standard_names() and model.vision.second_tower.global_layers == [1]


def test_an_sdpa_load_refuses_the_second_towers_interior_and_serves_its_output(path, model):
    eager, model = model, StandardizedTransformer(path, task="image-text-to-text", dispatch=True,
                                                  attn_implementation="sdpa", device="cpu")
    # one class a process, whatever the loads: a remote request names an envoy class by the order it was made in
    assert type(model.vision.second_tower) is type(eager.vision.second_tower)
    prompt, pictures = chat(model), [image(84, 84)]
    with refused_before_running(model, "runs as sdpa"):
        with model.trace(prompt, images=pictures):
            model.vision.second_tower.layers[1].self_attn.attention_probabilities.save()
    with model.trace(prompt, images=pictures):
        added = model.vision.second_tower.layers[1].self_attn.attention_output.save()
    assert added.shape[-1] == model.vision.second_tower.vision_hidden_size
