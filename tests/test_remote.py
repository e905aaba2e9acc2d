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
from nnsight.modeling.mixins.remotable import Remotable

from vlreg import LocalOnly, StandardizedTransformer, Unavailable, analysis
from vlreg.core.envoys.text import Attention, Layer
from vlreg.core.envoys.standard import Standard
from vlreg.testing import build, chat, load
from vlreg.testing.conformance import image
from vlreg.testing.server import ServerBackend

CHECKPOINT = "qwen2_vl"


def arrive(model):
    """The model as a server's unpickler rebuilds it from a request."""
    return loads(dumps(model), model._remoteable_persistent_objects())


def test_the_model_arrives_with_a_lock_family_and_maps_of_its_own(model):
    with model.trace(chat(model), images=[image(112, 84)]):
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
    prompt, images = chat(model), [image(112, 84)]

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
    prompt, images = chat(model), [image(112, 84)]

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
    # What a server's controller asks before placing it, answered from the folder alone.
    info = Remotable.describe_checkpoint(key, "float32")
    assert info.size_bytes >= 4 * sum(p.numel() for p in model._module.parameters())
    assert info.config.model_type == "qwen2_vl"


# -- sessions, helpers, refusals, placement ------------------------------------------------


def ways(model):
    """The two remote runs a check compares with a local one (see RemoteConformance)."""
    return ["local", ServerBackend(model)]


def test_a_remote_session_carries_a_value_from_one_trace_to_the_next(model):
    prompt, images = chat(model), [image(112, 84)]

    def run(how):
        with model.session(**how):
            with model.trace(prompt, images=images):
                features = model.vision.image_features  # no save: a session is the boundary
            with model.trace(prompt, images=images):
                model.vision.image_features[:] = features * 2
                doubled = model.logits.save()
        return doubled

    local = run({})
    assert torch.equal(run({"remote": "local"}), local)
    assert torch.equal(run({"backend": ServerBackend(model)}), local)


def test_every_analysis_helper_that_runs_traces_takes_remote(model):
    prompt, images = chat(model), [image(112, 84)]
    other = [image(112, 84, seed=5)]
    calls = {
        "logit_lens": lambda **how: analysis.logit_lens(model, prompt, images, top=2, **how).top_ids,
        "ablate_image": lambda **how: analysis.ablate_image(model, prompt, images, **how).ablated,
        "occlusion": lambda **how: analysis.occlusion(model, prompt, images, batch=12, **how).scores,
        "patch_image": lambda **how: analysis.patch_image(model, prompt, images, other, **how).effects,
        "attention_to_images": lambda **how: analysis.attention_to_images(model, prompt, images, **how).weights,
        "tower_patterns": lambda **how: analysis.tower_patterns(model, prompt, images, **how).patterns,
        "next_token_probs": lambda **how: analysis.next_token_probs(model, prompt, images, **how),
        "compare_streams": lambda **how: analysis.compare_streams(model, model, "The quick brown fox", **how),
    }
    for name, call in calls.items():
        local = call()
        # remote="local" hides this process's modules while the request deserializes; once
        # (occlusion) is enough for the helpers, which travel by reference.
        for remote in ways(model) if name == "occlusion" else [ServerBackend(model)]:
            found = call(remote=remote)
            assert type(found) is type(local), name
            pairs = zip(local, found) if isinstance(local, list) else [(local, found)]
            assert all(torch.equal(a, b) for a, b in pairs), f"{name} under remote={remote!r}"


def test_the_gradient_helpers_are_refused_before_they_are_sent_to_a_server(model):
    """An NDIF model actor loads the weights frozen, so a helper that backpropagates from its
    own metric gets no gradient there: sending it is refused here, by name (nothing listens
    at the host: a request sent would fail otherwise). remote="local" still runs it."""
    prompt, images = chat(model), [image(112, 84)]
    helpers = {
        "attribution_patching": lambda **how: analysis.attribution_patching(model, prompt, images, images, **how),
        "saliency": lambda **how: analysis.saliency(model, prompt, images, target=5, **how),
        "integrated_gradients": lambda **how: analysis.integrated_gradients(model, prompt, images, target=5, **how),
        "relevancy": lambda **how: analysis.relevancy(model, prompt, images, target=5, **how),
    }
    for name, call in helpers.items():
        for remote in (True, "http://127.0.0.1:9"):
            with pytest.raises(Unavailable, match=f"^{name} cannot run on an NDIF server: it takes gradients"):
                call(remote=remote)


def test_dictionary_helpers_take_remote_and_a_dictionary_attaches_again_where_it_arrives(model):
    from vlreg.dictionaries import Dictionary, feature_maps, selectivity

    width, features = model.hidden_size, 8
    generator = torch.Generator().manual_seed(0)
    tensors = {"W_enc": torch.randn(width, features, generator=generator), "b_enc": torch.zeros(features),
               "W_dec": torch.randn(features, width, generator=generator), "b_dec": torch.zeros(width)}
    dictionary = Dictionary.from_tensors(tensors).attach(model, "layers[0].layer_output")
    prompt, images = chat(model), [image(112, 84)]
    maps, chosen = feature_maps(dictionary, prompt, images), selectivity(dictionary, prompt, images)
    for remote in ways(model):
        assert torch.equal(feature_maps(dictionary, prompt, images, remote=remote).activations[0], maps.activations[0])
        assert torch.equal(selectivity(dictionary, prompt, images, remote=remote).image_rate, chosen.image_rate)

    # A client that never loads the weights (dispatch=False) keeps the matrices as given;
    # the dictionary attaches again to the model it arrives with, in that model's dtype.
    client = StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text")
    remote_only = Dictionary.from_tensors(tensors).attach(client, "layers[0].layer_output")
    assert remote_only.W_enc.device.type == "cpu" and torch.equal(remote_only.W_enc, tensors["W_enc"])
    server = load("qwen2_vl", dtype=torch.bfloat16)
    objects = server._remoteable_persistent_objects()
    arrived = loads(dumps(remote_only), objects)
    assert arrived.site == "layers[0].layer_output" and arrived.W_enc.dtype == torch.bfloat16
    assert arrived.model._module is server._module


def test_a_trace_replaying_this_process_s_tower_is_refused_before_it_is_sent(model):
    prompt, images = chat(model), [image(112, 84)]
    cache = model.vision.cache(prompt, images)
    # An address nothing listens on: the refusal comes from serializing, not from a server.
    for remote in ("http://127.0.0.1:9", "local"):
        with pytest.raises(LocalOnly, match="model.session\\(remote=...\\)"):
            with model.trace(prompt, images=images, remote=remote):
                cache.replay()
                model.logits.save()
    # Made and replayed on the server, in one session, the cache serves.
    with model.trace(prompt, images=images):
        cache.replay()
        local = model.logits.save()
    with model.session(backend=ServerBackend(model)):
        served = model.vision.cache(prompt, images)
        with model.trace(prompt, images=images):
            served.replay()
            replayed = model.logits.save()
    assert torch.equal(replayed, local)


def test_the_readout_refuses_to_run_where_the_weights_are_not():
    client = StandardizedTransformer(str(build("qwen2_vl")), task="image-text-to-text")
    with pytest.raises(Unavailable, match="inside the remote trace"):
        analysis.project_on_vocab(client, torch.zeros(client.hidden_size))


@pytest.mark.parametrize("dispatch", [True, False], ids=["cpu", "meta"])
def test_ndif_multi_gpu_placement_kwargs_bind_the_same_names(model, dispatch):
    # NDIF's actor loads a model spread over several GPUs with from_model_key(key,
    # dispatch=True, dtype=<name>, device_map="balanced", max_memory={gpu: bytes}); here
    # the memory is the CPU's (no GPU), and on meta the placement is left to dispatch.
    memory = {"cpu": 2**31} if dispatch else {0: 2**30, 1: 2**30}
    placed = StandardizedTransformer.from_model_key(model.to_model_key(), dispatch=dispatch, dtype="float32",
                                                    device_map="balanced", max_memory=memory)
    assert placed.dispatched is dispatch
    placed._remoteable_set_env(model._remoteable_get_env())  # as the actor does before each request
    names = lambda m: {name: (type(envoy), envoy.path) for name, envoy in m.named_modules() if isinstance(envoy, Standard)}  # noqa: E731
    assert names(placed) == names(model) and placed.support() == model.support()
    if dispatch:
        prompt, images = chat(model), [image(112, 84)]
        with placed.trace(prompt, images=images):
            logits = placed.logits.save()
        with model.trace(prompt, images=images):
            want = model.logits.save()
        assert torch.equal(logits, want)


def test_an_envoy_class_made_inside_a_function_is_refused_before_it_is_sent():
    def make():
        class Local(Layer):
            pass

        return Local

    with pytest.raises(LocalOnly, match="made inside a function"):
        dumps(object.__new__(make()))
