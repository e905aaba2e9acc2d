"""Training a dictionary on a store `vlreg.collect` wrote, with sae-lens' trainer.

`train(store, value, out)` streams ``value``'s rows from the store's shards (`stream`)
into sae-lens' ``SAETrainer`` (``pip install 'vlreg[train]'``): its training SAEs (ReLU with
an L1 penalty, TopK, BatchTopK), its optimiser and schedules, its dead-feature tracking
and metrics, its checkpoints. vlreg adds the data, the progress lines, resuming, and the
files: ``out`` ends up an sae-lens SAE folder (``cfg.json``, ``sae_weights.safetensors``)
that ``sae_lens.SAE.load_from_disk(out)`` and `Dictionary.load(out)` both read, and
``training.json``, the run's settings, the trainer's metrics along the way, and an
evaluation of the saved dictionary on the store.

A transcoder (``output=``: another value of the store, as wide) is trained by the same
trainer on both values' rows side by side: the SAE encodes the input's half and its loss
and metrics are against the output's half. It is saved as sae-lens' ``transcoder`` (ReLU)
or ``jumprelu_transcoder`` (BatchTopK); sae-lens has no TopK transcoder to load, so TopK
is refused for one.

Resuming: checkpoints go to ``out/checkpoints/<samples>`` every ``checkpoint_every`` steps
(the SAE and sae-lens' trainer state: optimiser, schedules, firing counts). A run given an
``out`` holding checkpoints of the same settings starts from the latest whole one, and the
data stream resumes at that sample, so it ends where an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import torch
from attrs import frozen

from ..collect.store import Store, open_store
from .stream import batches, block_rows
from .dictionary import Dictionary

ARCHITECTURES = ("relu", "topk", "batchtopk")
CONFIG, WEIGHTS, REPORT, CHECKPOINTS = "cfg.json", "sae_weights.safetensors", "training.json", "checkpoints"
SETTINGS = "settings.json"  # a run's settings while it runs: a resumed run must match them
STATE = "trainer_state.pt"  # sae-lens writes it last but one in a checkpoint
SCALER = "activation_scaler.json"  # and this last: a checkpoint that has it is whole


@frozen
class Trained:
    """A finished training: its folder (an sae-lens SAE folder) and ``training.json``."""

    path: Path
    report: dict

    @property
    def dictionary(self) -> Dictionary:
        return Dictionary.load(self.path)


def _sae_lens() -> Any:
    try:
        import sae_lens
    except ImportError:
        raise ImportError("training a dictionary uses sae-lens' trainer, which is not installed: "
                          "pip install 'vlreg[train]'") from None
    return sae_lens


def train(store: "Store | str | os.PathLike", value: str, out: "str | os.PathLike", *, output: str | None = None,
          architecture: str = "topk", features: int | None = None, k: int = 32, l1: float = 1.0,
          steps: int | None = None, batch: int = 4096, lr: float = 3e-4, lr_decay: float = 0.2, seed: int = 0,
          checkpoint_every: int = 1000, buffer_mib: float = 256, device: str = "cpu", progress: bool = True,
          log_every: int = 100, evaluate_rows: int = 65536, pause_after: int | None = None) -> "Trained | None":
    """Train a dictionary on ``value``'s rows of ``store`` (a `Store` or its folder) into ``out``.

    ``architecture``: ``"topk"`` (``k`` features active a row), ``"batchtopk"`` (``k`` on
    average over a batch; saved as JumpReLU), ``"relu"`` (an L1 penalty of weight ``l1``).
    ``features`` defaults to 8 times the value's width; ``steps`` (of ``batch`` rows) to
    one pass over the store; the learning rate ``lr`` falls linearly to 0 over the last
    ``lr_decay`` of the steps. The decoder's rows are unit-norm in the saved dictionary, so
    an activation is the size of its direction in the value. ``buffer_mib`` bounds the
    rows held to shuffle (`stream`). Refused before any work: a value the store lacks, an
    unknown architecture, a transcoder of values of different widths or of TopK, and an
    ``out`` that holds a finished training or another run's checkpoints.

    ``pause_after``: stop after that many steps of this run, with a checkpoint, and return
    None (a job with a time limit); the next call with the same settings goes on."""
    store = store if isinstance(store, Store) else open_store(store)
    columns = [store[value]] + ([store[output]] if output else [])
    width = columns[0].shape[1]
    settings = _settings(store, value, output, architecture, width, features, k, l1, steps, batch, lr, seed,
                         columns, device)
    settings["lr_decay"] = lr_decay
    out = Path(out)
    if (out / REPORT).exists():
        raise FileExistsError(f"{out} already holds a trained dictionary ({REPORT}): train into another folder")
    latest = _resumable(out, settings)
    sae_lens = _sae_lens()
    steps, features = settings["steps"], settings["features"]
    sae = _training_sae(sae_lens, settings, store)
    trainer = _trainer(sae_lens, settings, sae, out, checkpoint_every, progress, log_every)
    if latest is not None:
        from safetensors.torch import load_file

        sae.load_state_dict(load_file(str(latest / WEIGHTS)))
        trainer.load_trainer_state(latest)
        trainer.checkpoint_thresholds = [t for t in trainer.checkpoint_thresholds if t >= trainer.n_training_samples]
        _say(progress, f"resuming from {latest} (step {trainer.n_training_steps} of {steps})")
    out.mkdir(parents=True, exist_ok=True)
    (out / SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")
    block = block_rows(sum(c.shape[1] for c in columns), buffer_mib, len(columns[0]))
    rows = batches(columns, batch, seed=seed, block=block, start=trainer.n_training_samples)
    trainer.data_provider = rows if pause_after is None else _pausing(rows, pause_after)
    first = trainer.n_training_steps
    started = time.perf_counter()
    try:
        with _quiet_bar(progress):
            trainer.fit()
    except _Pause:
        trainer.save_checkpoint(checkpoint_name=str(trainer.n_training_samples))
        _say(progress, f"paused at step {trainer.n_training_steps} of {steps}, checkpoint in {out / CHECKPOINTS}")
        return None
    seconds = time.perf_counter() - started
    _save(sae, settings, out)
    dictionary = Dictionary.load(out)
    report = {"settings": settings, "trainer": f"sae-lens {sae_lens.__version__}",
              "steps_this_run": trainer.n_training_steps - first, "resumed_from_step": first or None,
              "train_seconds": round(seconds, 2),
              "activations_per_second": round((trainer.n_training_steps - first) * batch / max(seconds, 1e-9)),
              "dead_features": int(trainer.dead_neurons.sum()), "history": trainer.history,
              "evaluation": evaluate(dictionary, columns, evaluate_rows)}
    (out / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)  # finished: training.json holds the settings
    (out / SETTINGS).unlink(missing_ok=True)
    ev = report["evaluation"]
    _say(progress, f"trained {features} {architecture} features on {value} in {seconds:.1f} s "
                   f"({report['activations_per_second']} activations/s): explained variance {ev['explained_variance']}, "
                   f"L0 {ev['l0']}, {ev['alive']} of {features} features fire on {ev['rows']} rows; in {out}")
    return Trained(out, report)


class _Pause(Exception):
    """Raised by the data stream to stop the trainer between two steps."""


def _pausing(rows: Iterator, steps: int) -> Iterator:
    for _ in range(steps):
        yield next(rows)
    raise _Pause


def _settings(store, value, output, architecture, width, features, k, l1, steps, batch, lr, seed, columns,
              device) -> dict:
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture is one of {', '.join(ARCHITECTURES)}, not {architecture!r}")
    if output is not None:
        if columns[1].shape[1] != width:
            raise ValueError(f"a transcoder here maps a value to one as wide: {value} is {width} wide, {output} "
                             f"{columns[1].shape[1]}")
        if architecture == "topk":
            raise ValueError("sae-lens has no TopK transcoder to load the result: train a transcoder with "
                             "architecture='batchtopk' (saved as JumpReLU) or 'relu'")
    features = 8 * width if features is None else int(features)
    if architecture != "relu" and not 0 < k <= features:
        raise ValueError(f"k={k}: a {architecture} dictionary keeps between 1 and its {features} features active")
    if batch < 1 or (steps is not None and steps < 1):
        raise ValueError(f"batch ({batch}) and steps ({steps}) are positive")
    rows = len(columns[0])
    if rows == 0:
        raise ValueError(f"{store.path} holds no rows of {value}")
    return {"store": str(store.path.resolve()), "value": value, "output": output, "at": store.manifest["at"],
            "model": store.manifest["model"].get("path"), "rows": rows, "width": width,
            "architecture": architecture, "features": features, "k": None if architecture == "relu" else k,
            "l1": l1 if architecture == "relu" else None, "steps": int(steps or max(1, rows // batch)),
            "batch": batch, "lr": lr, "seed": seed, "device": str(device)}


def _resumable(out: Path, settings: dict) -> Path | None:
    """The latest whole checkpoint in ``out``, if any; refuses another run's checkpoints."""
    found = sorted((p for p in (out / CHECKPOINTS).glob("*") if (p / SCALER).exists() and p.name.isdigit()),
                   key=lambda p: int(p.name))
    if not found:
        return None
    before = json.loads((out / SETTINGS).read_text()) if (out / SETTINGS).exists() else {}
    differ = [f"{key}: {before.get(key)!r}, not {value!r}" for key, value in settings.items() if before.get(key) != value]
    if differ:
        raise ValueError(f"{out} holds checkpoints of another training ({'; '.join(differ)}): resume with the same "
                         "settings, or train into another folder")
    return found[-1]


def _training_sae(sae_lens: Any, settings: dict, store: Store) -> Any:
    """The sae-lens training SAE of the settings, initialised from the seed."""
    from sae_lens.registry import get_sae_training_class
    from sae_lens.saes.sae import SAEMetadata

    kind = {"relu": "standard", "topk": "topk", "batchtopk": "batchtopk"}[settings["architecture"]]
    sae_class, config_class = get_sae_training_class(kind)
    options: dict[str, Any] = {"d_in": settings["width"], "d_sae": settings["features"], "device": settings["device"],
                               "apply_b_dec_to_input": settings["output"] is None}
    if kind == "standard":
        options["l1_coefficient"] = settings["l1"]
    else:
        options["k"] = settings["k"]
    metadata = SAEMetadata(model_name=settings["model"], hook_name=settings["value"], hook_name_out=settings["output"],
                           vlreg_store=settings["store"], vlreg_at=settings["at"])
    if settings["output"] is not None:
        sae_class = type(f"Transcoding{sae_class.__name__}", (_Transcoding, sae_class), {})
    torch.manual_seed(settings["seed"])
    return sae_class(config_class(metadata=metadata, **options))


class _Transcoding:
    """Mixed into a training SAE: the batch is ``[input, output]`` side by side; encode the
    input, reconstruct the output (loss, auxiliary loss and the trainer's metrics against it)."""

    def training_forward_pass(self, step_input: Any) -> Any:
        from sae_lens.saes.sae import TrainStepOutput

        x, y = step_input.sae_in.chunk(2, dim=-1)
        acts, pre = self.encode_with_hidden_pre(x)
        out = self.decode(acts)
        losses = {"mse_loss": self.mse_loss_fn(out, y).sum(dim=-1).mean()}
        losses.update(self.calculate_aux_loss(step_input=dataclasses.replace(step_input, sae_in=y),
                                              feature_acts=acts, hidden_pre=pre, sae_out=out))
        if hasattr(self, "update_topk_threshold"):  # BatchTopK's running threshold, as its own pass keeps it
            self.update_topk_threshold(acts)
        return TrainStepOutput(sae_in=y, sae_out=out, feature_acts=acts, hidden_pre=pre,
                               loss=sum(losses.values()), losses=losses)


def _trainer(sae_lens: Any, settings: dict, sae: Any, out: Path, every: int, progress: bool, log_every: int) -> Any:
    from sae_lens.config import LoggingConfig, SAETrainerConfig

    steps, batch = settings["steps"], settings["batch"]
    config = SAETrainerConfig(
        total_training_samples=steps * batch, train_batch_size_samples=batch, lr=settings["lr"], lr_end=0.0,
        lr_decay_steps=int(steps * settings["lr_decay"]), device=settings["device"], dead_feature_window=max(1, min(1000, steps // 4)),
        feature_sampling_window=max(1, min(2000, steps)), n_checkpoints=max(0, steps // every - 1) if every else 0,
        checkpoint_path=str(out / CHECKPOINTS), save_final_checkpoint=False, logger=LoggingConfig(log_to_wandb=False))
    base = sae_lens.SAETrainer

    class Trainer(base):  # sae-lens' trainer; its progress step also keeps the metrics every log_every steps
        history: list = []

        def _update_pbar(self, step_output: Any, pbar: Any, update_interval: int = 100) -> None:
            super()._update_pbar(step_output, pbar, update_interval)
            step = self.n_training_steps
            if step % log_every == 0 or step == steps:
                logged = self.build_train_step_log_dict(step_output, self.n_training_samples)
                row = {"step": step, "explained_variance": round(logged["metrics/explained_variance"], 4),
                       "l0": round(logged["metrics/l0"], 2), "dead_features": int(logged["sparsity/dead_features"]),
                       "loss": round(logged["losses/overall_loss"], 5)}
                self.history.append(row)
                _say(progress, f"step {step} of {steps}: explained variance {row['explained_variance']}, "
                               f"L0 {row['l0']}, dead features {row['dead_features']}")

    trainer = Trainer(config, sae, data_provider=iter(()))
    trainer.history = []
    return trainer


@contextlib.contextmanager
def _quiet_bar(progress: bool) -> Iterator[None]:
    """sae-lens' own progress bar (tqdm) off unless ``progress``: its trainer has no switch
    for it, so the trainer module's ``tqdm`` is a disabled one for the run."""
    from sae_lens.training import sae_trainer

    bar = sae_trainer.tqdm
    if not progress:
        sae_trainer.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        sae_trainer.tqdm = bar


def _save(sae: Any, settings: dict, out: Path) -> None:
    """The inference SAE into ``out`` (decoder rows unit-norm); a transcoder's config as
    sae-lens' transcoder architectures."""
    if settings["architecture"] == "relu":
        sae.fold_W_dec_norm()  # exact for ReLU: each feature's activation scaled by its decoder row's norm
    sae.save_inference_model(out)
    if settings["output"] is not None:
        config = json.loads((out / CONFIG).read_text())
        config["architecture"] = {"standard": "transcoder", "jumprelu": "jumprelu_transcoder"}[config["architecture"]]
        config["d_out"] = settings["width"]
        (out / CONFIG).write_text(json.dumps(config))


@torch.no_grad()
def evaluate(dictionary: Dictionary, columns: list, rows: int = 65536, chunk: int = 8192) -> dict:
    """The dictionary on the first ``rows`` rows of the columns (input, and output for a
    transcoder): explained variance (one minus the squared error over the rows' variance
    about their mean), mean active features a row (L0), and how many features fire."""
    count = min(rows, len(columns[0]))
    error = total = active = 0.0
    fired = torch.zeros(dictionary.features, dtype=torch.bool)
    target = columns[-1]
    mean = target[:count].float().mean(0)
    for start in range(0, count, chunk):
        stop = min(count, start + chunk)
        x = columns[0][start:stop].float().to(dictionary.W_enc.device, dictionary.W_enc.dtype)
        y = target[start:stop].float()
        acts = dictionary.encode(x)
        error += float((dictionary.decode(acts).float().cpu() - y).pow(2).sum())
        total += float((y - mean).pow(2).sum())
        active += float((acts > 0).sum())
        fired |= (acts > 0).any(0).cpu()
    return {"rows": count, "explained_variance": round(1 - error / max(total, 1e-30), 4),
            "l0": round(active / max(count, 1), 2), "alive": int(fired.sum())}


def _say(progress: bool, line: str) -> None:
    if progress:
        print(line, file=sys.stderr, flush=True)
