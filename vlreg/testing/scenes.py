"""The toy's held-out scenes (`vlreg.testing.toy.scenes`) as files: a Hugging Face dataset
folder that ``vlreg collect --images`` reads, each scene with its question and what is
where, so the docs' commands run on images whose every token's content is known.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from . import toy


def save(folder: "str | os.PathLike", n: int, seed: int = 0) -> Path:
    """``toy.scenes(n, seed)`` saved by ``datasets.Dataset.save_to_disk`` into ``folder``:
    columns ``name`` (``scene-00000.png``), ``image``, ``prompt`` (the question before the
    image, through the chat template), ``shape`` (the asked shape), ``answer`` and
    ``shapes`` (JSON: each shape's colour and box)."""
    import datasets

    drawn = toy.scenes(n, seed=seed)
    rows = {"name": [f"scene-{i:05d}.png" for i in range(n)], "image": [s.image for s in drawn],
            "prompt": [s.prompt for s in drawn], "shape": [s.shape for s in drawn], "answer": [s.answer for s in drawn],
            "shapes": [json.dumps(s.shapes) for s in drawn]}
    features = datasets.Features({"name": datasets.Value("string"), "image": datasets.Image(),
                                  "prompt": datasets.Value("string"), "shape": datasets.Value("string"),
                                  "answer": datasets.Value("string"), "shapes": datasets.Value("string")})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(folder))
    return Path(folder)


def held(shapes: "dict | str", box: Any) -> "tuple[str, str] | None":
    """The ``(colour, shape)`` whose box ``box`` ``(x0, y0, x1, y1)`` overlaps in a scene of
    ``shapes`` (a scene's ``shapes``, or the dataset's JSON of them), else None."""
    shapes = json.loads(shapes) if isinstance(shapes, str) else shapes
    x0, y0, x1, y1 = box
    for shape, (colour, (a0, b0, a1, b1)) in shapes.items():
        if a0 < x1 and x0 < a1 and b0 < y1 and y0 < b1:
            return colour, shape
    return None
