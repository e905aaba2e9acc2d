"""A dictionary whose features we can check: a small TopK sparse autoencoder trained on
the toy model's (`vlreg.testing.toy`) block output at image tokens, with sae-lens' trainer
through `vlreg.dictionaries.train`.

The toy's image tokens each hold one 28-pixel cell of a scene: mostly background, some a
shape of one of six colours. Its answer (a shape's colour) is read from the shape's token
after block 0, so a dictionary on ``layers[0].layer_output`` at the image tokens should
find features for what a cell holds, and turning such a feature off at a shape's token
may move the answer (see docs/seeing-into-the-image.md). `build` returns the one shipped
in the package (``shipped/dictionary``: the sae-lens SAE folder `train` writes, its
``training.json`` holding the recipe), trained from `RECIPE` on the shipped toy; another
recipe is trained into the cache once, under a file lock, keyed by a hash of the recipe
(which holds the toy's own key).

Training reads activations `vlreg.collect` wrote into a store (the path a dictionary
trainer takes over a dataset), from scenes the toy's tests never use (a seed stream of
their own), on one thread by default, seeded: sae-lens' TopK SAE (`RECIPE`'s ``k``
features active a token), saved with unit-norm decoder rows; about twenty seconds on a
quiet machine.

`label`, `purity` and `zero_effects` are the known-answer check of docs and tests: which
shape (and colour) each image token holds, how purely a feature's strongest tokens are
of one colour or one shape, and what turning it off there does to the answer.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from . import cache, toy

VERSION = "dictionary-2"

RECIPE = {
    "version": VERSION,
    "toy": toy.key(),
    "site": "layers[0].layer_output",
    "scenes": 1000,
    "scene_seed": 1000,
    "seed": 0,
    "architecture": "topk",
    "features": 128,
    "k": 6,
    "steps": 2000,
    "batch": 1024,
    "lr": 3e-3,
    "lr_decay": 0.5,
}


def key(recipe: dict | None = None) -> str:
    recipe = RECIPE if recipe is None else recipe
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


#: The shipped dictionary: package data, an sae-lens SAE folder trained from `RECIPE` on the shipped toy.
SHIPPED = toy.SHIPPED.parent / "dictionary"
REPORT = "training.json"


def path(recipe: dict | None = None) -> Path:
    """Where the recipe's dictionary is: `SHIPPED` for `RECIPE`, else in the cache beside
    toys of other recipes. Its report is in it (``training.json``)."""
    recipe = RECIPE if recipe is None else recipe
    return SHIPPED if recipe == RECIPE else toy.cache_dir() / f"dictionary-{key(recipe)}"


def shipped_report() -> dict:
    """The shipped dictionary's ``training.json``: its recipe and key, the trainer's
    settings and metrics, the evaluation on its training rows."""
    return json.loads((SHIPPED / REPORT).read_text())


def load_model() -> Any:
    """The shipped toy, loaded as the test kit loads a checkpoint (`vlreg.testing.load`)."""
    from .kit import load

    return load(toy.build())


def build(model: Any = None, recipe: dict | None = None) -> Path:
    """The trained dictionary's folder: the shipped one for `RECIPE`; another recipe's
    trained into the cache if absent, once, under a file lock. ``model`` is the toy,
    loaded if needed and not given. Raises `toy.NotShipped` where `RECIPE` and the
    shipped files disagree, rather than training silently."""
    recipe = RECIPE if recipe is None else recipe
    if recipe == RECIPE:
        shipped = shipped_report()
        if shipped["key"] != key():
            raise toy.NotShipped(
                f"the toy dictionary shipped in {SHIPPED} was trained from recipe {shipped['key']}, but "
                f"dictionary.RECIPE hashes to {key()} (its toy {RECIPE['toy']}): the recipe or the toy changed and "
                f"the dictionary was not shipped again. Run `python -m vlreg.testing.ship`, or undo the change"
            )
        return SHIPPED

    def make(scratch: Path) -> None:
        print(f"training the toy dictionary from recipe {key(recipe)} ...", file=sys.stderr, flush=True)
        train(load_model() if model is None else model, scratch, recipe)

    return cache.once(path(recipe), make, f"training the toy dictionary from recipe {key(recipe)}")


def load(model: Any = None, recipe: dict | None = None) -> Any:
    """The trained dictionary, attached to the toy ``model`` at the recipe's site."""
    from ..dictionaries import Dictionary

    recipe = RECIPE if recipe is None else recipe
    model = load_model() if model is None else model
    return Dictionary.load(build(model, recipe)).attach(model, recipe["site"])


def collected(model: Any, scenes: list, folder: "str | Path", site: str = RECIPE["site"], chunk: int = 50) -> list[str]:
    """``scenes`` collected by `vlreg.collect` at ``site`` into a store at ``folder``, each
    under its name ``scene-<index>`` (returned, in scene order), with its own prompt."""
    from ..collect import collect

    names = [f"scene-{index:05d}" for index in range(len(scenes))]
    prompts = dict(zip(names, (scene.prompt for scene in scenes)))
    collect(model, [site], dict(zip(names, (scene.image for scene in scenes))), folder,
            prompt=lambda record: prompts[record["image"]], batch=chunk, shard_images=10 * chunk, progress=False)
    return names


def train(model: Any, out: "str | Path", recipe: dict | None = None, threads: int = 1) -> dict:
    """Train the recipe's dictionary on fresh scenes into ``out`` (`vlreg.dictionaries.train`
    on a store of them); returns the report it writes there (``training.json``: the
    trainer's, with the recipe, its key, the threads and the seconds spent collecting)."""
    from ..dictionaries import train as train_on

    recipe = RECIPE if recipe is None else recipe
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="vlreg-dictionary-") as store:
            started = time.perf_counter()
            collected(model, toy.scenes(recipe["scenes"], seed=recipe["scene_seed"]), store, recipe["site"])
            seconds = time.perf_counter() - started
            trained = train_on(store, recipe["site"], out, architecture=recipe["architecture"],
                               features=recipe["features"], l1=recipe.get("l1", 1.0), k=recipe.get("k", 32), steps=recipe["steps"],
                               batch=recipe["batch"], lr=recipe["lr"], lr_decay=recipe["lr_decay"], seed=recipe["seed"], progress=False)
    finally:
        torch.set_num_threads(before)
    report = {"recipe": recipe, "key": key(recipe), "threads": threads, "collect_seconds": round(seconds, 1),
              **trained.report}
    report["settings"].update(store="a temporary store of the recipe's scenes", model="vlreg.testing.toy")
    (Path(out) / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    config = json.loads((Path(out) / "cfg.json").read_text())  # no paths of this machine in what ships
    config["metadata"].update(model_name="vlreg.testing.toy", vlreg_store=report["settings"]["store"])
    (Path(out) / "cfg.json").write_text(json.dumps(config))
    return report


@torch.no_grad()
def activations(model: Any, scenes: list, site: str = RECIPE["site"], chunk: int = 50) -> torch.Tensor:
    """The value at ``site`` at every image token of ``scenes``, ``[scenes * 36, hidden]``,
    in scene order: collected into a store by `vlreg.collect` (as a dictionary trainer reads
    a dataset's activations), then read back from it."""
    from ..collect import open_store

    with tempfile.TemporaryDirectory(prefix="vlreg-dictionary-") as store:
        names = collected(model, scenes, store, site, chunk)
        opened = open_store(store)
        rows = [opened.index.rows(name) for name in names]  # a clean run writes them in order; a resumed one may not
        return torch.cat([opened[site][part].float() for part in rows])


def label(model: Any, scenes: list) -> list[tuple[str, str] | None]:
    """Per image token of ``scenes`` (36 a scene, in order): the ``(colour, shape)`` of the
    shape whose box its box overlaps, else None (each shape lies in one token's cell)."""
    found: list = []
    for scene in scenes:
        (geometry,) = model.vision.geometry(scene.prompt, [scene.image])
        held: list = [None] * geometry.tokens
        b = geometry.boxes
        for shape, (colour, (x0, y0, x1, y1)) in scene.shapes.items():
            for token in ((b[:, 0] < x1) & (x0 < b[:, 2]) & (b[:, 1] < y1) & (y0 < b[:, 3])).nonzero()[:, 0].tolist():
                held[token] = (colour, shape)
        found += held
    return found


def purity(acts: torch.Tensor, labels: list, feature: int) -> tuple[str, str, float, int]:
    """A feature's strongest tokens (activation at least half its largest, over every
    token of ``acts``) and how many hold one colour, or one shape: ``(kind, value,
    precision, tokens)`` for whichever of the two is purer, kind ``"colour"`` or
    ``"shape"``."""
    column = acts[:, feature]
    top = (column >= 0.5 * column.max()).nonzero()[:, 0].tolist() if column.max() > 0 else []
    best = ("colour", "", 0.0, len(top))
    for index, kind in enumerate(("colour", "shape")):
        held = [labels[t][index] for t in top if labels[t] is not None]
        for value in set(held):
            share = held.count(value) / len(top)
            if share > best[2]:
                best = (kind, value, share, len(top))
    return best


@torch.no_grad()
def zero_effects(dictionary: Any, scenes: list, acts: torch.Tensor, feature: int, kind: str, value: str,
                 others: "list[int]" = ()) -> torch.Tensor:
    """For each scene whose answer is about ``value`` (its answer is that colour, or the
    asked shape is that shape) and where ``feature`` fires: how far the answer's logit
    at the last position drops when ``feature`` is turned off at the tokens where it
    fires (through the dictionary, keeping the error), ``[1 + len(others), scenes]``:
    then each of ``others`` turned off at the same tokens instead (controls). ``acts``
    holds the scenes' activations, 36 rows a scene."""
    model = dictionary._model()
    drops = []
    for index, scene in enumerate(scenes):
        if (scene.answer if kind == "colour" else scene.shape) != value:
            continue
        where = (acts[index * 36 : (index + 1) * 36, feature] > 0).nonzero()[:, 0].tolist()
        if not where:
            continue
        answer = model.tokenizer.convert_tokens_to_ids(scene.answer)
        (geometry,) = model.vision.geometry(scene.prompt, [scene.image])
        with model.trace(scene.prompt, images=[scene.image]):
            clean = model.logits[0, -1, answer].save()
        row = []
        for turned_off in (feature, *others):
            with model.trace(scene.prompt, images=[scene.image]):
                rows = dictionary.rows(geometry)
                for token in where:
                    dictionary.zero(rows[token : token + 1], turned_off)
                edited = model.logits[0, -1, answer].save()
            row.append(float(clean - edited))
        drops.append(row)
    return torch.tensor(drops).reshape(-1, 1 + len(others)).T
