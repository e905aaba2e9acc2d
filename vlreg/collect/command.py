"""``vlreg collect``: load the checkpoint, check the input, collect into the store.

The images' folder is checked before the model loads (an empty folder, an unreadable file
under ``--on-error stop``, a video file without PyAV), so a mistake costs no load. Under ``torchrun`` a CUDA device is
the process's own (``cuda:LOCAL_RANK``). With ``--remote`` the model is built here without
its weights (the server holds them) and each batch is traced there.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def run(arguments: argparse.Namespace) -> int:
    from .run import collect
    from .sources import items, unreadable

    images: Any = arguments.images
    if _saved_dataset(Path(images)):
        import datasets

        images = datasets.load_from_disk(images)
    else:
        for item in items(images):
            why = unreadable(item) if arguments.on_error == "stop" else None
            if why is not None:
                raise ValueError(f"{item.kind} {item.name} cannot be read ({why}): fix or remove it, or pass --on-error skip")
    from .. import StandardizedTransformer

    device = arguments.device
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        device = f"cuda:{os.environ['LOCAL_RANK']}"
    remote = arguments.remote
    model = StandardizedTransformer(arguments.checkpoint, task="image-text-to-text", dispatch=not remote,
                                    device=None if remote else device, dtype=arguments.dtype,
                                    attn_implementation=arguments.attn_implementation)
    collect(model, arguments.values, images, arguments.out, prompt=arguments.prompt, at=arguments.at,
                    batch=arguments.batch, dtype=arguments.store_dtype, on_error=arguments.on_error,
                    shard_images=arguments.shard_images, image_column=arguments.image_column,
                    prompt_column=arguments.prompt_column, key_column=arguments.key_column, remote=remote,
                    frames=arguments.frames)
    return 0


def _saved_dataset(folder: Path) -> bool:
    """A folder ``datasets.Dataset.save_to_disk`` wrote."""
    return (folder / "dataset_info.json").is_file() and (folder / "state.json").is_file()
