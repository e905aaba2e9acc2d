"""A vlreg model under nnsight's remote serialization: what travels, what is made anew on
the other side, and the model key a server rebuilds it from.

``remote="local"`` serializes a trace exactly as a request to NDIF (the block's source, its
globals cloudpickled, modules and the interleaver by persistent id), hides the modules a
server would not have, deserializes and runs it here; a real server runs the same payload
against the model it built from the key.
"""

from __future__ import annotations

import json
import threading

import pytest
import torch
from nnsight.intervention.serialization import dumps, loads

from vlreg import StandardizedTransformer
from vlreg.core.envoys import Attention
from vlreg.testing import build
from vlreg.testing.conformance import image


def load(name: str, **options):
    options = {"task": "image-text-to-text", "dispatch": True, "device": "cpu", "attn_implementation": "eager", **options}
    return StandardizedTransformer(str(build(name)), **options)


@pytest.fixture(scope="module")
def model():
    return load("qwen2_vl")


def prompt_of(model, images=1):
    content = [{"type": "image"}] * images + [{"type": "text", "text": "What is in this image?"}]
    return model.processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=False)


def arrive(model):
    """The model as a server's unpickler rebuilds it from a request."""
    return loads(dumps(model), model._remoteable_persistent_objects())


def test_the_model_arrives_with_a_lock_family_and_maps_of_its_own(model):
    with model.trace(prompt_of(model), images=[image(112, 84)]):
        model.logits.save()  # leaves this process's last batch on the model
    arrived = arrive(model)
    assert isinstance(arrived._lock, type(threading.RLock())) and arrived._lock is not model._lock
    assert arrived._run.image_tokens is None, "the last trace's batch stays home"
    assert arrived.family is not model.family and arrived.family.name == model.family.name
    assert arrived._module is model._module, "the module travels by persistent id"
    for envoy in arrived.modules():
        assert envoy._rename is arrived.family.rename and envoy._envoys is arrived.family.envoys
    # No rename map travels: the family's maps pickle as empty dicts.
    for carried in (model.family.rename, model.family.envoys):
        assert carried and loads(dumps(carried)) == {} and b"layers" not in dumps(carried)


def test_value_descriptors_travel_by_reference():
    described = Attention.attention_probabilities
    assert loads(dumps(described)) is described


def test_a_trace_under_remote_local_reads_what_a_local_trace_reads(model):
    prompt, images = prompt_of(model), [image(112, 84)]

    def run(remote):
        with model.trace(prompt, images=images, remote=remote):
            features = model.vision.image_features.save()
            pattern = model.layers[0].self_attn.attention_probabilities.save()
            logits = model.logits.save()
        return features, pattern, logits

    for local, remote in zip(run(False), run("local")):
        assert torch.equal(local, remote)


def test_envoy_classes_a_plugin_makes_at_import_travel_by_reference():
    # vlreg-gemma makes its attention classes at import (one per wrapper's pattern
    # description): they cannot be imported by name, so they travel as (module, name, serial).
    model = load("gemma3")
    attention = model.layers[0].self_attn
    assert type(attention).__module__ == "vlreg_gemma.text"
    prompt, images = prompt_of(model), [image(112, 84)]

    def run(remote):
        with model.trace(prompt, images=images, remote=remote):
            pattern = model.layers[0].self_attn.attention_probabilities.save()
            logits = model.logits.save()
        return pattern, logits

    for local, remote in zip(run(False), run("local")):
        assert torch.equal(local, remote)
    assert type(arrive(model).layers[0].self_attn) is type(attention)


def test_the_key_of_a_local_folder_needs_no_hub_and_rebuilds_the_model(model):
    key = model.to_model_key()
    path, suffix = key.split(":", 1)
    assert path == "vlreg.core.model.StandardizedTransformer"
    data = json.loads(suffix)
    assert data["repo_id"] == str(build("qwen2_vl").resolve()) and data["task"] == "image-text-to-text"
    rebuilt = StandardizedTransformer.from_model_key(key, dispatch=True, device="cpu", dtype=torch.bfloat16,
                                                     attn_implementation="sdpa")
    assert rebuilt.task == "image-text-to-text" and rebuilt.processor is not None
    assert rebuilt.dispatched and rebuilt._module.dtype == torch.bfloat16 and rebuilt.attn_implementation == "sdpa"
    assert rebuilt.layers[0].path == model.layers[0].path and rebuilt.vision.path == model.vision.path
    assert rebuilt.to_model_key() == key
