"""``vlreg train`` and ``vlreg features``: their arguments here (no torch imported), their
work in `vlreg.dictionaries.train` and `vlreg.features.build`, imported when they run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_train(commands: Any) -> None:
    train = commands.add_parser(
        "train", help="train a dictionary (SAE, or a transcoder) on a store vlreg collect wrote, with sae-lens' trainer")
    train.add_argument("store", help="the store's folder")
    train.add_argument("value", help="the value to train on, as the store names it: 'layers[0].layer_output'")
    train.add_argument("--out", required=True, help="the dictionary's folder (an sae-lens SAE folder; a rerun resumes "
                                                    "from its checkpoints)")
    train.add_argument("--output", default=None, help="a transcoder: the value of the store it predicts (as wide)")
    train.add_argument("--architecture", default="topk", choices=("topk", "batchtopk", "relu"),
                       help="topk (default), batchtopk (saved as JumpReLU) or relu (an L1 penalty)")
    train.add_argument("--features", type=int, default=None, help="how many (default: 8 times the value's width)")
    train.add_argument("-k", type=int, default=32, help="features active a row (topk; on average: batchtopk)")
    train.add_argument("--l1", type=float, default=1.0, help="the L1 penalty's weight (relu)")
    train.add_argument("--steps", type=int, default=None, help="training steps (default: one pass over the rows)")
    train.add_argument("--batch", type=int, default=4096, help="rows a step (default: 4096)")
    train.add_argument("--lr", type=float, default=3e-4, help="learning rate (default: 3e-4)")
    train.add_argument("--lr-decay", type=float, default=0.2,
                       help="the share of the steps, at the end, over which the rate falls to 0 (default: 0.2)")
    train.add_argument("--seed", type=int, default=0, help="initialisation and data order (default: 0)")
    train.add_argument("--checkpoint-every", type=int, default=1000, help="steps between checkpoints (default: 1000)")
    train.add_argument("--buffer-mib", type=float, default=256, help="rows held to shuffle, in MiB (default: 256)")
    train.add_argument("--device", default="cpu", help="where to train (default: cpu)")
    train.add_argument("--quiet", action="store_true", help="no progress on stderr")
    train.set_defaults(run=_train)


def _train(arguments: argparse.Namespace) -> int:
    from .dictionaries import train

    train(arguments.store, arguments.value, arguments.out, output=arguments.output,
          architecture=arguments.architecture, features=arguments.features, k=arguments.k, l1=arguments.l1,
          steps=arguments.steps, batch=arguments.batch, lr=arguments.lr, lr_decay=arguments.lr_decay,
          seed=arguments.seed, checkpoint_every=arguments.checkpoint_every, buffer_mib=arguments.buffer_mib,
          device=arguments.device, progress=not arguments.quiet)
    return 0


def add_features(commands: Any) -> None:
    features = commands.add_parser(
        "features", help="a static site (offline) of a dictionary's features, or of directions, over a store")
    features.add_argument("store", help="the store's folder")
    features.add_argument("dictionary", nargs="?", default=None,
                          help="a dictionary: an sae-lens folder (vlreg train's) or a tensors file")
    features.add_argument("--images", required=True, help="the images the store was collected from: a folder, or a "
                                                         "folder datasets' save_to_disk wrote")
    features.add_argument("--out", required=True, help="the site's folder (open index.html)")
    features.add_argument("--direction", action="append", default=[], metavar="NAME=FILE",
                          help="a direction instead of a dictionary (a probe's weights, a steering vector): a "
                               ".safetensors or .pt file of one [width] tensor; repeat for several")
    features.add_argument("--value", default=None, help="the store's value (default: the dictionary's, or the only one)")
    features.add_argument("--model", default=None,
                          help="the checkpoint whose unembedding gives each feature's promoted tokens (default: the "
                               "store's model, where its folder is here; 'none' for none)")
    features.add_argument("--top", type=int, default=16, help="top activations shown a feature (default: 16)")
    features.add_argument("--per-image", type=int, default=1, help="of them, at most this many from one image")
    features.add_argument("--title", default=None, help="the site's title")
    features.add_argument("--image-column", default="image", help="a dataset's image column (default: image)")
    features.add_argument("--key-column", default=None, help="a dataset's column of image names (default: row number)")
    features.add_argument("--quiet", action="store_true", help="no progress on stderr")
    features.set_defaults(run=_features)


def _features(arguments: argparse.Namespace) -> int:
    from .collect.command import _saved_dataset
    from .collect.store import open_store
    from .features import build

    if (arguments.dictionary is None) == (not arguments.direction):
        raise ValueError("give a dictionary or --direction NAME=FILE (one of the two)")
    store = open_store(arguments.store)
    images: Any = arguments.images
    if _saved_dataset(Path(images)):
        import datasets

        images = datasets.load_from_disk(images)
    model = arguments.model
    if model is None:
        recorded = store.manifest["model"].get("path")
        model = recorded if recorded and Path(recorded).is_dir() else None
    elif model == "none":
        model = None
    build(store, arguments.out, images, dictionary=arguments.dictionary,
          directions=_directions(arguments.direction) if arguments.direction else None, value=arguments.value,
          model=model, top=arguments.top, per_image=arguments.per_image, title=arguments.title,
          image_column=arguments.image_column, key_column=arguments.key_column, progress=not arguments.quiet)
    return 0


def _directions(given: list[str]) -> dict:
    """``NAME=FILE`` pairs as named ``[width]`` tensors."""
    import torch

    found = {}
    for pair in given:
        name, _, file = pair.partition("=")
        if not file:
            raise ValueError(f"--direction takes NAME=FILE, not {pair!r}")
        if file.endswith(".safetensors"):
            from safetensors.torch import load_file

            tensors = list(load_file(file).values())
        else:
            loaded = torch.load(file, map_location="cpu", weights_only=True)
            tensors = list(loaded.values()) if isinstance(loaded, dict) else [loaded]
        if len(tensors) != 1 or tensors[0].dim() != 1:
            raise ValueError(f"{file} must hold one [width] tensor (the direction), not {[tuple(t.shape) for t in tensors]}")
        found[name] = tensors[0].float()
    return found
