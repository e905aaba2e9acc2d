"""vlreg's traces through a real NDIF server, each compared with the same trace run here.

`make test-remote` starts the server (``tests/remote/server.py``: ndif 0.1.2 on this
machine, a CPU model actor) and runs these with ``VLREG_NDIF_URL`` naming it; without
it they skip. Each trace is sent the way a user sends one, ``remote=<url>``: nnsight
serializes it, NDIF's API queues it, the dispatcher hands it to the model actor the
controller deployed for the model key, which rebuilds the model from the key (vlreg's
class, for vlreg's models), runs the block and sends the saved values back.
"""

from __future__ import annotations

import os

import pytest
import torch
from nnsight import LanguageModel
from nnsight.modeling.huggingface import _ID_CACHE

from vlreg import StandardizedTransformer
from vlreg.testing import build
from vlreg.testing.conformance import image

URL = os.environ.get("VLREG_NDIF_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="needs make test-remote's server (VLREG_NDIF_URL unset)")

FAMILIES = ("qwen2_vl", "llava_interleave")


def local_key(folder) -> str:
    """The checkpoint's folder, its own id in the model key: the client canonicalizes a
    repo id through the Hub, which a folder (and this offline machine) has no entry in.
    The server reads the same folder (the same disk)."""
    path = str(folder)
    _ID_CACHE.setdefault(path, path)
    return path


def test_a_plain_nnsight_model_runs_through_the_server():
    """The server itself, without vlreg's names: a block's output, an edit, the logits."""
    model = LanguageModel(local_key(build("qwen2_base")), dispatch=True, device_map="cpu", dtype=torch.float32)
    prompt = "The Eiffel Tower is in Paris."

    def run(remote):
        with model.trace(prompt, remote=remote):
            block = model.model.layers[0].output.save()
            logits = model.lm_head.output.save()
        with model.trace(prompt, remote=remote):
            model.model.layers[0].output[:] = 0
            edited = model.lm_head.output.save()
        return block, logits, edited

    here, there = run(False), run(URL)
    assert not torch.equal(here[1], here[2])
    for local, remote in zip(here, there):
        torch.testing.assert_close(remote, local)


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    return StandardizedTransformer(
        local_key(build(request.param)), task="image-text-to-text", dispatch=True,
        attn_implementation="eager", device="cpu", dtype=torch.float32,
    )


def prompt_of(model) -> str:
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    return model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def reads(model, remote) -> dict:
    """Image values, a block's value and its attention pattern, the logits."""
    with model.trace(prompt_of(model), images=[image(112, 84)], remote=remote):
        saved = {
            "image_token_mask": model.vision.image_token_mask.save(),
            "patch_embeddings": model.vision.patch_embeddings.save(),
            "image_features": model.vision.image_features.save(),
            "attention_probabilities": model.layers[1].self_attn.attention_probabilities.save(),
            "layer_output": model.layers[1].layer_output.save(),
            "logits": model.logits.save(),
        }
    return saved


def ablated(model, remote) -> torch.Tensor:
    """The logits with the image ablated as the text model receives it."""
    with model.trace(prompt_of(model), images=[image(112, 84)], remote=remote):
        model.vision.image_features[:] = 0
        logits = model.logits.save()
    return logits


def test_reads_through_the_server_match_the_local_trace(model):
    here, there = reads(model, False), reads(model, URL)
    assert here["image_token_mask"].any()
    assert there.keys() == here.keys()
    for name, local in here.items():
        torch.testing.assert_close(there[name], local, msg=lambda message: f"{name}: {message}")


def test_an_image_features_edit_through_the_server_matches_the_local_edit(model):
    here, there = ablated(model, False), ablated(model, URL)
    assert not torch.equal(here, reads(model, False)["logits"])
    torch.testing.assert_close(there, here)
