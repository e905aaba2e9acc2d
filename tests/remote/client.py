"""One researcher of several sharing `make test-remote`'s NDIF deployment at once.

    python tests/remote/client.py <index> <url> <checkpoint folder> [--sandboxed]

Sends, in an order of its own (rotated by ``index``), a read of its own image, an edit
scaled by its own factor, a trace that fails with its own words, and a second read;
compares each answer with the same trace run here. Prints one JSON line saying what it
got, and exits 1 if any answer was not its own. Run by `test_ndif.py`, N at a time.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

import nnsight
import torch

from vlreg.testing import chat, load
from vlreg.testing.conformance import image


def same(there: torch.Tensor, here: torch.Tensor) -> bool:
    """Whether the server's answer is this trace's local one (float32's tolerance)."""
    return there.shape == here.shape and torch.allclose(there, here, rtol=1.3e-6, atol=1e-5)


def read(model, picture, remote):
    with model.trace(chat(model), images=[picture], remote=remote):
        features = model.vision.image_features.save()
        logits = model.logits.save()
    return torch.cat([features.flatten(), logits.flatten()])


def edit(model, picture, factor, remote):
    with model.trace(chat(model), images=[picture], remote=remote):
        model.vision.image_features[:] = model.vision.image_features * factor
        logits = model.logits.save()
    return logits


def fail(model, picture, words, remote):
    with model.trace(chat(model), images=[picture], remote=remote):
        features = model.vision.image_features
        if features.shape[0] > 0:
            raise ValueError(words)
    return None


def main(index: int, url: str, checkpoint: str, sandboxed: bool) -> int:
    if sandboxed:  # an ordinary key: ndif's auth sends its requests to the sandbox
        nnsight.CONFIG.API.APIKEY = os.environ["VLREG_NDIF_UNTRUSTED_KEY"]
    model = load(checkpoint, dtype=torch.float32)  # the same folder, so the same key and deployment
    picture, factor = image(112, 84, seed=index), float(index + 2)
    words = f"client {index} fails on purpose ({uuid.uuid4().hex})"
    steps = ["read", "edit", "fail"]
    steps = steps[index % 3:] + steps[: index % 3] + ["read"]
    report = {"index": index, "sandboxed": sandboxed, "steps": steps, "own": [], "error": None}
    for step in steps:
        if step == "read":
            report["own"].append(same(read(model, picture, url), read(model, picture, False)))
        elif step == "edit":
            report["own"].append(same(edit(model, picture, factor, url), edit(model, picture, factor, False)))
        else:
            try:
                fail(model, picture, words, url)
            except Exception as error:  # the server's error, as nnsight raises it here
                report["error"] = f"{type(error).__name__}: {error}"
            report["own"].append(report["error"] is not None and words in report["error"])
    print(json.dumps(report), flush=True)
    return 0 if all(report["own"]) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2], sys.argv[3], "--sandboxed" in sys.argv[4:]))
