"""A store is the same however it was made: in one clean run, rerun, killed for real and
resumed, or by two processes under torchrun (gloo, on the CPU)."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from PIL import Image

from vlreg import StandardizedTransformer
from vlreg.collect import collect, open_store
from vlreg.testing import build

pytestmark = pytest.mark.heavy  # collection runs in processes, under torchrun: started first under make test

SIZES = [(56, 56), (84, 56), (112, 84), (112, 112)]
VALUES = ["vision.image_features", "layers[1].layer_output"]
OPTIONS = {"prompt": "What is in this image?", "batch": 2, "shard_images": 2}
IMAGES = 12


@pytest.fixture(scope="module")
def checkpoint():
    return str(build("qwen2_vl"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    found = tmp_path_factory.mktemp("images")
    for index in range(IMAGES):
        size = SIZES[index % len(SIZES)]
        picture = torch.randint(0, 256, (size[1], size[0], 3), generator=torch.Generator().manual_seed(index))
        Image.fromarray(picture.byte().numpy()).save(found / f"image{index:02d}.png")
    return found


@pytest.fixture(scope="module")
def model(checkpoint):
    return StandardizedTransformer(checkpoint, task="image-text-to-text", dispatch=True, device="cpu")


@pytest.fixture(scope="module")
def clean(model, folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "store"
    collect(model, VALUES, folder, out, progress=False, **OPTIONS)
    return out


def command(checkpoint, folder, out):
    return ["-m", "vlreg", "collect", checkpoint, "--images", str(folder), "--values", *VALUES, "--out", str(out),
            "--prompt", OPTIONS["prompt"], "--batch", str(OPTIONS["batch"]),
            "--shard-images", str(OPTIONS["shard_images"])]


def assert_same(made, clean):
    a, b = open_store(made), open_store(clean)
    assert a.images == b.images and a.image_prompts == b.image_prompts and a.prompts == b.prompts
    assert a.manifest == b.manifest
    assert torch.equal(a.index.token, b.index.token) and torch.equal(a.index.image_id, b.index.image_id)
    assert torch.equal(a.index.box.nan_to_num(-1), b.index.box.nan_to_num(-1))
    for name in VALUES:
        assert torch.equal(a[name][:], b[name][:]), name


def shards(out):
    return sorted(path.name for path in (out / "shards").glob("[!.]*.safetensors")) if (out / "shards").exists() else []


def test_a_rerun_adds_nothing_and_rewrites_nothing(model, folder, clean):
    before = {name: (clean / "shards" / name).stat().st_mtime_ns for name in shards(clean)}
    summary = collect(model, VALUES, folder, clean, progress=False, **OPTIONS)
    assert summary.images == 0 and summary.already == IMAGES and summary.store_images == IMAGES
    assert {name: (clean / "shards" / name).stat().st_mtime_ns for name in shards(clean)} == before


def test_killed_mid_run_then_resumed_is_the_clean_store(model, checkpoint, folder, clean, tmp_path):
    out = tmp_path / "store"
    process = subprocess.Popen([sys.executable, *command(checkpoint, folder, out)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not shards(out) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)  # as a crash or an out-of-memory kill would
    process.wait()
    landed = shards(out)
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
    assert 1 <= len(landed) < IMAGES // OPTIONS["shard_images"], landed  # killed mid-way
    assert open_store(out).images == [f"image{i:02d}.png" for i in range(2 * len(landed))]
    (out / "shards" / f".{landed[0]}.4242.tmp").write_bytes(b"half a shard")  # what a kill mid-write leaves
    assert open_store(out).images == [f"image{i:02d}.png" for i in range(2 * len(landed))]
    summary = collect(model, VALUES, folder, out, progress=False, **OPTIONS)
    assert summary.already == 2 * len(landed) and summary.images == IMAGES - 2 * len(landed)
    assert not list((out / "shards").glob(".*"))  # the leftover is removed once every process is done
    assert_same(out, clean)


def test_two_processes_under_torchrun_make_the_clean_store(checkpoint, folder, clean, tmp_path):
    out = tmp_path / "store"
    # torchrun gives each worker one thread unless told; another thread count sums floats in
    # another order, so the workers get this process's count and the rows can be equal bit for bit.
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           *command(checkpoint, folder, out)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 of 2: collected 6 images" in done.stderr and "rank 1 of 2: collected 6 images" in done.stderr
    assert f"now holds {IMAGES} images" in done.stderr
    assert_same(out, clean)


def test_a_store_made_in_memory_resumes_offloaded(checkpoint, folder, clean, tmp_path):
    """The same checkpoint with its tower and a text block on disk (offloaded weights sit
    on the meta device, their values where accelerate keeps them) is the same model: it
    resumes a store made in memory, and the rows it adds are the clean run's."""
    import shutil
    import warnings

    out = tmp_path / "store"
    shutil.copytree(clean, out)
    for name in shards(out)[2:]:
        (out / "shards" / name).unlink()
    on_disk = {"model.visual": "disk", "model.language_model.layers.1": "disk", "model.language_model.embed_tokens": "cpu",
               "model.language_model.layers.0": "cpu", "model.language_model.norm": "cpu",
               "model.language_model.rotary_emb": "cpu", "lm_head": "cpu"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # accelerate's note that some weights are on the meta device
        offloaded = StandardizedTransformer(checkpoint, task="image-text-to-text", dispatch=True, device_map=on_disk,
                                            offload_folder=str(tmp_path / "offload"))
    summary = collect(offloaded, VALUES, folder, out, progress=False, **OPTIONS)
    assert summary.already == 4 and summary.images == IMAGES - 4
    assert_same(out, clean)
