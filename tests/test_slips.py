"""The slips of a first hour, answered in vlreg's words before the model runs: a block
index out of range, a typo'd name, a folder with a config and no weights, a hub id with
no hub in reach, a task vlreg does not load."""

import http.server
import json
import shutil
import socket
import threading

import pytest
import torch

from vlreg import StandardizedTransformer
from vlreg.core import loading
from vlreg.testing import build, chat
from vlreg.testing.conformance import image

CHECKPOINT = "qwen2_vl"

IMAGE = image(112, 84)

#: Everything a checkpoint folder holds but its weights.
NOT_WEIGHTS = ("model.safetensors",)


def load(path, **options):
    options = {"task": "image-text-to-text", "dispatch": True, "device": "cpu", **options}
    return StandardizedTransformer(str(path), **options)


# -- block indices -------------------------------------------------------------------


@pytest.mark.parametrize("index", [99, 2, -3])
def test_a_text_block_out_of_range_says_how_many_blocks_there_are(model, index):
    assert model.num_layers == 2
    with pytest.raises(IndexError, match=rf"model.layers\[{index}\] is out of range: there are 2 blocks \(model.layers\[0\] to model.layers\[1\]"):
        model.layers[index]
    assert model.layers[-1] is model.layers[1]  # indices in range still reach the blocks


def test_a_tower_block_out_of_range_says_how_many_the_tower_has(model):
    with pytest.raises(IndexError, match=r"model.vision.layers\[50\] is out of range: there are 2 blocks"):
        model.vision.layers[50]


def test_an_index_out_of_range_inside_a_trace_is_refused_before_the_model_runs(model):
    ran = []
    handle = model._module.register_forward_pre_hook(lambda *_: ran.append(True))
    try:
        with pytest.raises(IndexError, match="there are 2 blocks"):
            with model.trace(chat(model), images=[IMAGE]):
                model.layers[99].layer_output.save()
    finally:
        handle.remove()
    assert not ran


# -- names ---------------------------------------------------------------------------


@pytest.mark.parametrize("where, name, closest", [
    (lambda model: model.layers[0], "layer_ouput", "layer_output"),
    (lambda model: model, "vison", "vision"),
    (lambda model: model.layers[0].self_attn, "attention_probs", "attention_probabilities"),
    (lambda model: model.vision, "image_featrues", "image_features"),
    (lambda model: model, "num_layer", "num_layers"),
])
def test_an_unknown_name_suggests_the_closest_standard_names(model, where, name, closest):
    with pytest.raises(AttributeError, match=rf"has no value or module '{name}': did you mean '{closest}'"):
        getattr(where(model), name)
    assert not hasattr(where(model), name)  # still an AttributeError, as hasattr expects


def test_native_modules_keep_their_names_beside_the_suggestions(model):
    assert model.layers[0].self_attn.q_proj._module is model._module.model.language_model.layers[0].self_attn.q_proj
    assert model.model.visual is model.vision  # the native path reaches the same envoy
    with model.trace(chat(model), images=[IMAGE]):
        native = model.layers[0].mlp.down_proj.output.save()
        standard = model.layers[0].mlp.mlp_output.save()
    assert torch.equal(native, standard)


def test_a_part_this_load_lacks_is_named_absent():
    text = StandardizedTransformer(str(build("qwen2_base")), dispatch=True, device="cpu")
    with pytest.raises(AttributeError, match="model.vision is absent on this load"):
        text.vision


# -- a folder with a config and no weights ---------------------------------------------


@pytest.fixture
def no_weights(tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(build("qwen2_vl"), folder, ignore=shutil.ignore_patterns(*NOT_WEIGHTS))
    return folder


def test_a_folder_without_weights_names_the_files_transformers_looks_for(no_weights):
    with pytest.raises(FileNotFoundError, match=r"holds a config but no weights: transformers loads model.safetensors"):
        load(no_weights)


def test_a_folder_without_weights_builds_on_meta_and_refuses_at_dispatch(no_weights):
    lazy = load(no_weights, dispatch=False)
    assert lazy.num_layers == 2  # built from the config alone, as vlreg inspect does
    with pytest.raises(FileNotFoundError, match="holds a config but no weights"):
        lazy.dispatch()
    assert not lazy.dispatched


@pytest.mark.parametrize("task, lacks", [
    ("image-text-to-text", r"a tokenizer \(tokenizer.json or .*\); an image processor \(processor_config.json or "
                           r"preprocessor_config.json\)"),
    ("text-generation", r"a tokenizer \(tokenizer.json or "),
])
def test_a_folder_without_processor_files_names_them(tmp_path, task, lacks):
    """transformers would name one file, or ask for sentencepiece under text generation."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(build("qwen2_vl"), folder, ignore=shutil.ignore_patterns("tokenizer*", "processor_config.json",
                                                                             "chat_template*"))
    with pytest.raises(FileNotFoundError, match=rf"holds a config but not what task='{task}' loads .*lacks {lacks}"):
        load(folder, task=task)


@pytest.mark.parametrize("spelling, dtype", [("bf16", torch.bfloat16), ("torch.float16", torch.float16),
                                             ("half", torch.float16), (torch.float32, torch.float32)])
def test_a_dtype_in_its_common_spellings(spelling, dtype):
    assert load(build("qwen2_vl"), dtype=spelling).dtype == dtype


def test_a_dtype_that_is_no_float_is_refused_naming_the_spellings():
    for given in ("bfloat", "int8"):
        with pytest.raises(ValueError, match=rf"dtype='{given}' is not a floating-point dtype .*'bfloat16' \('bf16'\)"):
            load(build("qwen2_vl"), dtype=given)


def test_an_index_whose_shards_are_missing_names_them(no_weights):
    from safetensors.torch import load_file, save_file

    tensors = load_file(build("qwen2_vl") / "model.safetensors")
    names = sorted(tensors)
    save_file({name: tensors[name] for name in names[::2]}, no_weights / "model-00001-of-00002.safetensors")
    weight_map = {name: f"model-0000{1 + i % 2}-of-00002.safetensors" for i, name in enumerate(names)}
    (no_weights / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    with pytest.raises(FileNotFoundError, match=r"names 2 weight shards and 1 of them are not in the folder: model-00002-of-00002.safetensors"):
        load(no_weights)


# -- a hub id without a network -------------------------------------------------------


REPO = "vlreg-tests/tiny-qwen2-vl"


@pytest.fixture
def closed_port():
    """A local address nothing listens on: connecting is refused at once, as from a
    machine without a network."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def hub_cache(tmp_path):
    """A hub cache that holds a copy of `REPO`, laid out as huggingface_hub lays it out."""
    cache = tmp_path / "hub"
    repo = cache / f"models--{REPO.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(build("qwen2_vl"), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return cache


def test_an_offline_setting_and_no_cached_copy_fail_at_once_naming_the_id(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError, match=rf"HF_HUB_OFFLINE is set, so vlreg looks for '{REPO}' only in the hub cache .*hf download {REPO}"):
        StandardizedTransformer(REPO, cache_dir=str(tmp_path / "empty"))


def test_a_hub_out_of_reach_and_no_cached_copy_fail_at_once_naming_the_id(monkeypatch, tmp_path, closed_port):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", closed_port)
    with pytest.raises(ConnectionError, match=rf"'{REPO}' is no folder here, so it is taken for a hub id, but the hub \({closed_port}\) cannot be reached"):
        StandardizedTransformer(REPO, task="image-text-to-text", cache_dir=str(tmp_path / "empty"))


def test_offline_a_hub_id_loads_its_copy_from_the_hub_cache(monkeypatch, hub_cache, closed_port):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", closed_port)
    with pytest.warns(UserWarning, match=rf"the hub cannot be reached .*: loading '{REPO}' from its copy in the hub cache"):
        cached = load(REPO, cache_dir=str(hub_cache))
    direct = load(build("qwen2_vl"))
    prompt = chat(direct)
    with cached.trace(prompt, images=[IMAGE]):
        got = cached.logits.save()
    with direct.trace(prompt, images=[IMAGE]):
        expected = direct.logits.save()
    assert torch.equal(got, expected)


def test_a_hub_that_answers_is_reachable_whatever_its_status():
    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(403)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert loading._hub_unreachable(f"http://127.0.0.1:{server.server_port}") is None
    finally:
        server.shutdown()
        server.server_close()


# -- tasks ---------------------------------------------------------------------------


@pytest.mark.parametrize("task, closest", [("image-text-to-txt", "image-text-to-text"), ("text2text-generation", "text-generation")])
def test_a_task_vlreg_does_not_load_is_refused_naming_the_ones_it_does(task, closest):
    with pytest.raises(ValueError, match=rf"task='{task}' is not a task vlreg loads: did you mean '{closest}'\? it takes 'text-generation' .* or 'image-text-to-text'"):
        StandardizedTransformer(str(build("qwen2_vl")), task=task)
