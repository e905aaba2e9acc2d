"""vlreg's traces through a real NDIF server, each compared with the same trace run here.

`make test-remote` starts the server (``tests/remote/server.py``: ndif 0.1.2 on this
machine, a CPU model actor) and runs these with ``VLREG_NDIF_URL`` naming it; without
it they skip. Each trace is sent the way a user sends one, ``remote=<url>``: nnsight
serializes it, NDIF's API queues it, the dispatcher hands it to the model actor the
controller deployed for the model key, which rebuilds the model from the key (vlreg's
class, for vlreg's models), runs the block and sends the saved values back.

Auth is on, as in a deployment: each request carries an API key from the server's keys
database (``NDIF_API_KEY``, a key with the ``trusted`` tag, unless a test says otherwise).
The model actor is ndif's sandboxing one: a trusted request runs in the actor, one with an
ordinary key (``sandboxed``) in a fresh runner process holding a weightless copy of the
model built from the same key, in lockstep with the actor's forward.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
import urllib.parse
import urllib.request

import nnsight
import nnsight.intervention.backends.remote as nnsight_remote
import pytest
import torch

from vlreg.testing import chat
from vlreg.testing.conformance import image

LOAD_OPTIONS = {"dtype": torch.float32}

URL = os.environ.get("VLREG_NDIF_URL")
pytestmark = pytest.mark.skipif(URL is None, reason="needs make test-remote's server (VLREG_NDIF_URL unset)")

CHECKPOINTS = ("qwen2_vl", "llava_interleave")


UNTRUSTED_KEY = os.environ.get("VLREG_NDIF_UNTRUSTED_KEY")  # a key without the `trusted` tag


@pytest.fixture
def sandboxed(monkeypatch):
    """Requests sent in this test carry an ordinary key, so they run in ndif's sandbox, not
    in the model actor (ndif's auth decides that from the key, whatever the client asks)."""
    monkeypatch.setattr(nnsight.CONFIG.API, "APIKEY", UNTRUSTED_KEY)
    return monkeypatch


def status(model) -> list:
    """This model's deployments as NDIF's ``/status`` lists them: (state, actor class)."""
    with urllib.request.urlopen(f"{URL}/status", timeout=60) as answer:
        deployments = json.load(answer)["deployments"].values()
    return [
        (entry["application_state"], entry["actor_class"])
        for entry in deployments
        if entry.get("model_key") == model.to_model_key()
    ]


def reads(model, remote) -> dict:
    """Image values, a block's attention pattern and value, the logits."""
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
    assert model.to_model_key().startswith("vlreg.core.model.StandardizedTransformer:")
    assert status(model) == [("RUNNING", "ndif_cpu.CPUModelActor")]


def test_reads_through_the_sandbox_match_the_local_trace(model, sandboxed):
    """The attention pattern too: the runner drills into the attention function over the
    socket (``vlreg.plugin.inside``), as the model actor does in its own process."""
    here, there = reads(model, False), reads(model, URL)
    assert set(there) == set(here)
    for name, local in here.items():
        torch.testing.assert_close(there[name], local, msg=lambda message: f"{name}: {message}")


def test_an_image_features_edit_through_the_sandbox_matches_the_local_edit(model, sandboxed):
    torch.testing.assert_close(ablated(model, URL), ablated(model, False))


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
@pytest.mark.parametrize(
    "key, status, says",
    [(None, 401, "Missing or invalid API key"), ("not-a-key", 400, "Invalid API key format: 'not-a-key'"),
     (str(uuid.uuid4()), 403, "Invalid API key.")],
    ids=["missing", "malformed", "unknown"],
)
def test_a_request_without_a_known_key_is_refused_in_ndifs_words(model, key, status, says, monkeypatch):
    """What the user sees is nnsight's RemoteError carrying ndif's own sentence, the HTTP
    status behind it, raised through vlreg's trace unchanged: neither masked nor rephrased."""
    monkeypatch.setattr(nnsight.CONFIG.API, "APIKEY", key)
    with pytest.raises(nnsight_remote.RemoteError) as refused:
        reads(model, URL)
    assert type(refused.value) is nnsight_remote.RemoteError
    answer = refused.value.__cause__.response
    assert answer.status_code == status
    assert says in answer.json()["detail"]
    assert str(refused.value) == f"Failed to send request: {answer.json()['detail']}"


STORE = os.environ.get("VLREG_NDIF_STORE")
INLINE_CAP = int(os.environ.get("VLREG_NDIF_INLINE_CAP", "0"))  # bytes ndif returns on the response itself


@pytest.fixture
def arrivals(monkeypatch) -> list:
    """What each COMPLETED response carried, as the client got it: the result's bytes
    (inline) or the presigned url it downloads the result from (the object store)."""
    carried = []
    download = nnsight_remote.RemoteBackend.download_result

    def recording(backend, data):
        carried.append(data)
        return download(backend, data)

    monkeypatch.setattr(nnsight_remote.RemoteBackend, "download_result", recording)
    return carried


def stored(url: str) -> int:
    """The size of the object a presigned url names, asked of the object store itself."""
    import boto3

    bucket, key = urllib.parse.urlsplit(url).path.lstrip("/").split("/", 1)
    store = boto3.client("s3", endpoint_url=STORE, region_name="us-east-1",
                         aws_access_key_id="vlreg", aws_secret_access_key="vlreg")
    return store.head_object(Bucket=bucket, Key=key)["ContentLength"]


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
@pytest.mark.parametrize("way", ["trusted", "sandboxed"])
def test_a_result_past_the_inline_cap_comes_back_through_the_object_store(model, way, arrivals, request):
    """A block's stream over a long prompt (about 2,000 tokens: 0.5 MB, twice the cap the
    server's Redis sets) is uploaded to the object store and downloaded from it, and is the
    local value; a small result of the same model still comes back on the response."""
    if way == "sandboxed":
        request.getfixturevalue("sandboxed")
    prompt = chat(model, text="describe the picture in detail " * 100)

    def stream(remote):
        with model.trace(prompt, images=[image(112, 84)], remote=remote):
            values = model.layers[1].layer_output.save()
        return values

    here, there = stream(False), stream(URL)
    assert here.nbytes > 2 * INLINE_CAP
    (url,) = arrivals
    assert isinstance(url, str) and url.startswith(f"{STORE}/"), url
    assert stored(url) > INLINE_CAP
    torch.testing.assert_close(there, here)

    reads(model, URL)
    assert isinstance(arrivals[-1], (bytes, bytearray)), "a small result should come back inline"


def stream_gradient(model, remote) -> torch.Tensor:
    """A block's gradient of one logit, the gradient started at the token embeddings (the
    server's weights are frozen: ndif's model actor loads them with requires_grad_(False))."""
    with model.trace(chat(model), images=[image(112, 84)], remote=remote):
        model.token_embeddings.requires_grad_()
        stream = model.layers[1].layer_output
        with model.logits[0, -1, 5].backward():
            grad = stream.grad.save()
    return grad


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
def test_gradients_through_the_server_are_the_local_ones_or_refused_by_name(model, sandboxed):
    """Trusted, a block's ``.grad`` read on the server is the local one, and the features'
    ``.grad`` (the tower's weights frozen there, the features computed before the embeddings'
    start) is refused in vlreg's words, sent back as the server's error. Sandboxed, every
    ``.grad`` is refused by name: the backward runs in the actor, out of the runner's reach."""
    here = stream_gradient(model, False)
    model._module.zero_grad(set_to_none=True)
    assert here.abs().sum() > 0
    with pytest.raises(Exception, match=r"gradients are not served where the trace's block runs apart .* sandbox"):
        stream_gradient(model, URL)
    sandboxed.undo()
    torch.testing.assert_close(stream_gradient(model, URL), here)
    with pytest.raises(Exception, match=r"vision.image_features.grad is unavailable: .* frozen"):
        with model.trace(chat(model), images=[image(112, 84)], remote=URL):
            model.token_embeddings.requires_grad_()
            features = model.vision.image_features
            with model.logits[0, -1, 5].backward():
                nnsight.save(features.grad)


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
@pytest.mark.parametrize("way", ["trusted", "sandboxed"])
def test_collects_batches_through_the_server_are_the_local_rows(model, way, request, tmp_path):
    """`vlreg.collect(..., remote=URL)`: each batch's trace runs on the server, the rows,
    index and boxes are the local run's."""
    from vlreg.collect import collect, open_store

    if way == "sandboxed":
        request.getfixturevalue("sandboxed")
    folder = tmp_path / "images"
    folder.mkdir()
    for index in range(3):
        image(112, 84, seed=index).save(folder / f"photo{index}.png")
    values = ["vision.image_features", "layers[1].layer_output"]
    for where, remote in (("here", False), ("there", URL)):
        collect(model, values, folder, tmp_path / where, prompt="What is shown?", batch=2, progress=False,
                remote=remote)
    here, there = open_store(tmp_path / "here"), open_store(tmp_path / "there")
    assert there.images == here.images and len(here.images) == 3
    assert torch.equal(there.index.token, here.index.token)
    assert torch.equal(there.index.box.nan_to_num(-1), here.index.box.nan_to_num(-1))
    for name in values:
        torch.testing.assert_close(there[name][:], here[name][:], msg=lambda message: f"{name}: {message}")


def environment(model, remote) -> list:
    """The names of the environment variables the block sees where it runs."""
    with model.trace(chat(model), images=[image(112, 84)], remote=remote):
        names = nnsight.save(sorted(os.environ))
    return names


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
def test_the_sandbox_keeps_the_operators_environment_from_the_block(model, sandboxed):
    """A block sent with the trusted key runs in the model actor and sees the operator's
    settings; one sent with an ordinary key runs in ndif's runner, which starts with a short
    allowlist of them. So the key, through ndif's auth, is what puts a trace in the sandbox."""
    assert "NDIF_REDIS_URL" not in environment(model, URL)
    sandboxed.undo()
    assert "NDIF_REDIS_URL" in environment(model, URL)


CLIENTS = 3  # researchers at once: the odd ones sandboxed, the even ones trusted
CLIENT_TIMEOUT = 600  # seconds for all of them


@pytest.mark.parametrize("model", ["qwen2_vl"], indirect=True)
def test_several_clients_at_once_each_get_their_own_results_and_errors(model):
    """`client.py` N times at once on loopback: reads, edits and a failing trace
    interleaved on one deployment; each process compares every answer with its own
    local trace and its error with its own words. Then the server still serves."""
    script = Path(__file__).with_name("client.py")
    checkpoint = json.loads(model.to_model_key().split(":", 1)[1])["repo_id"]
    clients = [
        subprocess.Popen(
            [sys.executable, str(script), str(index), URL, checkpoint, *(["--sandboxed"] if index % 2 else [])],
            stdout=subprocess.PIPE, text=True,
        )
        for index in range(CLIENTS)
    ]
    try:
        outputs = [client.communicate(timeout=CLIENT_TIMEOUT)[0] for client in clients]
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
                client.wait()
    reports = [json.loads(output.strip().splitlines()[-1]) for output in outputs]
    for client, report in zip(clients, reports):
        assert client.returncode == 0, report
        assert all(report["own"]) and len(report["own"]) == 4, report
        others = [f"client {index} " for index in range(CLIENTS) if index != report["index"]]
        assert not any(other in report["error"] for other in others), report
    assert status(model) == [("RUNNING", "ndif_cpu.CPUModelActor")]
    torch.testing.assert_close(ablated(model, URL), ablated(model, False))
