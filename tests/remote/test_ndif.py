"""vlreg's traces through a real NDIF server, each compared with the same trace run here.

`make test-remote` starts the server (``tests/remote/server.py``: ndif 0.1.2 on this
machine, a CPU model actor) and runs these with ``VLREG_NDIF_URL`` naming it; without
it they skip. Each trace is sent the way a user sends one, ``remote=<url>``: nnsight
serializes it, NDIF's API queues it, the dispatcher hands it to the model actor the
controller deployed for the model key, which rebuilds the model from the key (vlreg's
class, for vlreg's models), runs the block and sends the saved values back.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

LOAD_OPTIONS = {"dtype": torch.float32}

URL = os.environ.get("VLREG_NDIF_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="needs make test-remote's server (VLREG_NDIF_URL unset)")

CHECKPOINTS = ("qwen2_vl", "llava_interleave")


def reads(model, remote) -> dict:
    """Image values, a block's value and its attention pattern, the logits."""
    with model.trace(chat(model), images=[image(112, 84)], remote=remote):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        features = model.vision.image_features.save()
        pattern = model.layers[1].self_attn.attention_probabilities.save()
        block = model.layers[1].layer_output.save()
        logits = model.logits.save()
    return {
        "image_token_mask": mask, "patch_embeddings": patches, "image_features": features,
        "attention_probabilities": pattern, "layer_output": block, "logits": logits,
    }


def ablated(model, remote) -> torch.Tensor:
    """The logits with the image ablated as the text model receives it."""
    with model.trace(chat(model), images=[image(112, 84)], remote=remote):
        model.vision.image_features[:] = 0
        logits = model.logits.save()
    return logits


def test_reads_through_the_server_match_the_local_trace(model):
    here, there = reads(model, False), reads(model, URL)
    assert here["image_token_mask"].any()
    for name, local in here.items():
        torch.testing.assert_close(there[name], local, msg=lambda message: f"{name}: {message}")


def test_an_image_features_edit_through_the_server_matches_the_local_edit(model):
    here, there = ablated(model, False), ablated(model, URL)
    assert not torch.equal(here, reads(model, False)["logits"])
    torch.testing.assert_close(there, here)


def test_the_server_ran_them_on_its_model_actor_for_vlregs_key(model):
    """What answered is NDIF's deployment of this model's key (vlreg's class), on the CPU actor."""
    reads(model, URL)
    with urllib.request.urlopen(f"{URL}/status", timeout=60) as answer:
        deployments = json.load(answer)["deployments"].values()
    served = [entry for entry in deployments if entry.get("model_key") == model.to_model_key()]
    assert model.to_model_key().startswith("vlreg.core.model.StandardizedTransformer:")
    assert [(entry["application_state"], entry["actor_class"]) for entry in served] == [
        ("RUNNING", "ndif_cpu.CPUModelActor")
    ]
