"""`vlreg.dictionaries.train` (and ``vlreg train``): a handful of steps of sae-lens' trainer
on a tiny store of the toy's scenes. The result is an sae-lens SAE folder both sae-lens
and vlreg read, encoding alike; a paused run resumed ends where an uninterrupted one does,
bit for bit; a transcoder reconstructs its output value; bad settings are refused before
any work. What a trained dictionary finds is tested on the toy's (tests/test_dictionary_toy.py,
tests/test_features_guide.py); nothing here trains long."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from vlreg.cli import main
from vlreg.collect import collect, open_store
from vlreg.dictionaries import Dictionary, train
from vlreg.testing import toy

# found, not imported: sae-lens imports in seconds, and every pytest-xdist worker collects this module
pytestmark = pytest.mark.skipif(importlib.util.find_spec("sae_lens") is None,
                                reason="sae-lens is not installed (pip install 'vlreg[train]'): nothing to train with")
VALUE, INPUT, OUTPUT = "layers[0].layer_output", "layers[1].input", "layers[1].mlp.mlp_output"
SMALL = {"features": 32, "batch": 64, "lr": 3e-3, "progress": False}
CHECKPOINT = toy.build()  # the shipped toy's folder


@pytest.fixture(scope="module")
def sae_lens():
    import sae_lens

    return sae_lens


@pytest.fixture(scope="module")
def store(model, tmp_path_factory):
    """12 scenes' image tokens (432 rows), three values, shards of 4 images."""
    folder = tmp_path_factory.mktemp("store")
    scenes = toy.scenes(12, seed=5)
    names = [f"scene-{i}" for i in range(len(scenes))]
    prompts = dict(zip(names, (s.prompt for s in scenes)))
    collect(model, [VALUE, INPUT, OUTPUT], dict(zip(names, (s.image for s in scenes))), folder,
            prompt=lambda record: prompts[record["image"]], batch=4, shard_images=4, progress=False)
    return open_store(folder)


def test_a_topk_dictionary_loads_in_sae_lens_and_vlreg_alike(store, sae_lens, tmp_path):
    done = train(store, VALUE, tmp_path / "sae", architecture="topk", k=4, steps=6, log_every=3, **SMALL)
    report = json.loads((tmp_path / "sae" / "training.json").read_text())
    assert report == json.loads(json.dumps(done.report)) and report["trainer"] == f"sae-lens {sae_lens.__version__}"
    assert [row["step"] for row in report["history"]] == [3, 6]
    assert {"explained_variance", "l0", "dead_features"} <= set(report["history"][-1])
    assert report["evaluation"]["rows"] == len(store) == 432 and report["evaluation"]["l0"] == 4.0
    assert sorted(p.name for p in (tmp_path / "sae").iterdir()) == ["cfg.json", "sae_weights.safetensors", "training.json"]
    sae = sae_lens.SAE.load_from_disk(tmp_path / "sae")
    dictionary = Dictionary.load(tmp_path / "sae")
    assert type(sae).__name__ == "TopKSAE" and (dictionary.architecture, dictionary.k, dictionary.features) == ("topk", 4, 32)
    rows = store[VALUE][:50].float()
    with torch.no_grad():
        torch.testing.assert_close(dictionary.encode(rows), sae.encode(rows), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(dictionary.decode(dictionary.encode(rows)), sae.decode(sae.encode(rows)),
                                   atol=1e-4, rtol=1e-4)
    assert json.loads((tmp_path / "sae" / "cfg.json").read_text())["metadata"]["hook_name"] == VALUE
    assert torch.allclose(dictionary.W_dec.norm(dim=-1), torch.ones(32), atol=1e-5)   # unit-norm decoder rows


def test_a_paused_run_resumes_where_an_uninterrupted_one_ends(store, tmp_path):
    """Six steps straight, against three, a pause (with a checkpoint), then the rest:
    the same weights, bit for bit (the data stream resumes at the sample it stopped at)."""
    options = dict(architecture="relu", l1=0.5, steps=6, checkpoint_every=2, seed=3, **SMALL)
    train(store, VALUE, tmp_path / "straight", **options)
    assert train(store, VALUE, tmp_path / "paused", pause_after=3, **options) is None
    assert (tmp_path / "paused" / "checkpoints").is_dir() and not (tmp_path / "paused" / "training.json").exists()
    with pytest.raises(ValueError, match="holds checkpoints of another training.*seed: 3, not 4"):
        train(store, VALUE, tmp_path / "paused", **{**options, "seed": 4})
    resumed = train(store, VALUE, tmp_path / "paused", **options)
    assert resumed.report["resumed_from_step"] == 3 and resumed.report["steps_this_run"] == 3
    a, b = Dictionary.load(tmp_path / "straight"), Dictionary.load(tmp_path / "paused")
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    with pytest.raises(FileExistsError, match="already holds a trained dictionary"):
        train(store, VALUE, tmp_path / "paused", **options)


def test_a_transcoder_reads_one_value_and_reconstructs_another(store, sae_lens, tmp_path):
    done = train(store, INPUT, tmp_path / "transcoder", output=OUTPUT, architecture="batchtopk", k=4, steps=5, **SMALL)
    sae = sae_lens.SAE.load_from_disk(tmp_path / "transcoder")
    dictionary = Dictionary.load(tmp_path / "transcoder")
    assert type(sae).__name__ == "JumpReLUTranscoder" and dictionary.architecture == "jumprelu"
    assert dictionary.output == OUTPUT and done.report["settings"]["output"] == OUTPUT
    x, y = store[INPUT][:].float(), store[OUTPUT][:].float()
    with torch.no_grad():
        torch.testing.assert_close(dictionary.decode(dictionary.encode(x)), sae(x), atol=1e-4, rtol=1e-4)
    error = (dictionary.decode(dictionary.encode(x)) - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum()
    assert 1 - float(error) == pytest.approx(done.report["evaluation"]["explained_variance"], abs=1e-3)   # of the output
    with pytest.raises(ValueError, match="transcoder: its decoder predicts layers\\[1\\].mlp.mlp_output"):
        dictionary.zero(x[:1].clone(), 0)


def test_bad_settings_are_refused_before_any_work(store, tmp_path):
    with pytest.raises(KeyError, match="'layers\\[5\\].layer_output' is not in this store"):
        train(store, "layers[5].layer_output", tmp_path / "a", **SMALL)
    with pytest.raises(ValueError, match="architecture is one of relu, topk, batchtopk"):
        train(store, VALUE, tmp_path / "a", architecture="gated", **SMALL)
    with pytest.raises(ValueError, match="no TopK transcoder"):
        train(store, INPUT, tmp_path / "a", output=OUTPUT, architecture="topk", **SMALL)
    with pytest.raises(ValueError, match="k=64: a topk dictionary keeps between 1 and its 32"):
        train(store, VALUE, tmp_path / "a", k=64, **SMALL)
    assert not (tmp_path / "a").exists()


def test_the_command_trains_into_a_folder(store, tmp_path, capsys):
    assert main(["train", str(store.path), VALUE, "--out", str(tmp_path / "cli"), "--features", "16", "-k", "2",
                 "--steps", "2", "--batch", "32"]) == 0
    said = capsys.readouterr().err
    assert "trained 16 topk features on layers[0].layer_output" in said and "activations/s" in said
    assert Dictionary.load(tmp_path / "cli").k == 2
