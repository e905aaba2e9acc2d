"""A model whose answer we know: a small Qwen2-VL trained on the CPU to name the colour
of one shape in a scene of three, shipped with vlreg.

Each scene is a 168 x 168 picture (6 x 6 image tokens of 28 pixels) on a plain
background with a square, a circle and a triangle, each of a different one of six
colours, each small enough to sit inside one token's cell, at random cells. The
question, placed before the image, names one shape ("What color is the square?"); the
answer is its colour, one token. So the mechanism is known: the answer is at the named
shape's one token, and nowhere else in the image.

`build` returns the trained checkpoint that ships in the package (``shipped/toy``:
weights, config, a byte-level BPE tokenizer in which every colour and shape word is one
token, the real `Qwen2VLProcessor`, a chat template and ``toy.json``, the training's
report with its recipe), so every machine loads the same weights through
``from_pretrained`` and nothing is trained. `vlreg.testing.toy_training.train` trains one
from the recipe when asked (``python -m vlreg.testing.ship`` trains and ships it again),
and `build` with another recipe trains it into the cache once. The task, `scenes` (held-out
scenes, from a seed stream training never uses) and `RECIPE` are `vlreg.testing.toy_scenes`',
exported here too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from . import cache
from .toy_scenes import CELL, COLOURS, GRID, RECIPE, SHAPES, SIDE, VERSION, Scene, key, scenes

__all__ = ["CELL", "COLOURS", "GRID", "RECIPE", "SHAPES", "SIDE", "SHIPPED", "VERSION", "NotShipped", "Scene", "build",
           "cache_dir", "key", "scenes", "shipped_report"]

#: The shipped checkpoint: package data, trained from `RECIPE` (`toy_training.train`).
SHIPPED = Path(__file__).resolve().parent / "shipped" / "toy"


class NotShipped(RuntimeError):
    """`RECIPE` no longer matches the shipped checkpoint's: it was changed (or its code
    `VERSION`) and the toy was not trained and shipped again."""


def shipped_report() -> dict:
    """The shipped checkpoint's ``toy.json``: its recipe and key, training time, threads
    and held-out accuracy."""
    return json.loads((SHIPPED / "toy.json").read_text())


def cache_dir() -> Path:
    """Where toys of other recipes are trained: ``$VLREG_CACHE/toy``, else
    ``~/.cache/vlreg/toy``."""
    return cache.root() / "toy"


def build(path: "str | os.PathLike | None" = None, recipe: dict | None = None) -> Path:
    """The trained checkpoint's folder; with ``path``, a copy written there.

    `RECIPE`'s is the shipped one (`SHIPPED`): nothing is trained. Another recipe is
    trained into ``cache_dir() / key(recipe)`` once, under a file lock (processes started
    at once train it once). If `RECIPE` and the shipped files disagree, `NotShipped`
    says so and how to ship again, rather than training silently."""
    recipe = RECIPE if recipe is None else recipe
    report = shipped_report()
    if key(recipe) == report["key"]:
        folder = SHIPPED
    elif recipe == RECIPE:
        raise NotShipped(
            f"the toy model shipped in {SHIPPED} was trained from recipe {report['key']} (version "
            f"{report['recipe']['version']}), but toy.RECIPE (version {RECIPE['version']}) hashes to {key()}: the recipe "
            f"changed and the toy was not shipped again. Run `python -m vlreg.testing.ship` to train and ship it "
            f"(and the toy dictionary) from the new recipe, then regenerate the docs it feeds (see that module), "
            f"or undo the change"
        )
    else:
        def make(scratch: Path) -> None:
            print(f"training the toy model from recipe {key(recipe)} into {cache_dir()} ...", file=sys.stderr, flush=True)
            from .toy_training import train

            train(scratch, recipe)

        folder = cache.once(cache_dir() / key(recipe), make, f"training the toy model from recipe {key(recipe)}")
    if path is None:
        return folder
    shutil.copytree(folder, path, dirs_exist_ok=True)
    return Path(path)
