"""What a load checks before nnsight and transformers are asked for anything.

A checkpoint that cannot load should say so at once and in a user's terms: a local
folder that is not there (rather than half a minute of hub retries and a message about
repo ids), a ``model_type`` transformers does not know, a weights file cut short (at
load, not at the first trace of a lazy build), a text-generation load no image can
reach.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any, Iterator

import torch

from .errors import NoFamily

IMAGE_TEXT = "image-text-to-text"
TEXT = "text-generation"

#: A hub id: ``name`` or ``owner/name``.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def config_of(checkpoint: Any, kwargs: dict) -> Any:
    """The checkpoint's config, after checking a local folder holds a loadable one."""
    if isinstance(checkpoint, torch.nn.Module):
        return checkpoint.config
    if kwargs.get("config") is not None:
        return kwargs["config"]
    from transformers import AutoConfig

    folder = local_folder(checkpoint)
    if folder is not None:
        check_folder(folder, trust_remote_code=bool(kwargs.get("trust_remote_code")))
    options = {k: kwargs[k] for k in ("revision", "trust_remote_code", "token") if k in kwargs}
    return AutoConfig.from_pretrained(checkpoint, **options)


def local_folder(checkpoint: Any) -> Path | None:
    """The folder ``checkpoint`` names, or ``None`` for a hub id.

    Raises `FileNotFoundError` for a path (a ``PathLike``, or a string that is
    absolute, starts with ``.`` or ``~``, or is not shaped like a hub id) that does not
    exist, before any hub lookup.
    """
    if not isinstance(checkpoint, (str, os.PathLike)):
        return None
    path = Path(os.path.expanduser(os.fspath(checkpoint)))
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"{os.fspath(checkpoint)!r} is a file; a checkpoint is a folder (config.json and weights)")
        return path
    text = os.fspath(checkpoint)
    if isinstance(checkpoint, os.PathLike) or text.startswith((os.sep, ".", "~")) or not _HUB_ID.match(text):
        raise FileNotFoundError(
            f"no checkpoint folder at {text!r} ({path.resolve()} does not exist): pass the folder "
            f"a checkpoint was saved to (save_pretrained), or a hub id such as 'owner/name'"
        )
    return None


def check_folder(folder: Path, trust_remote_code: bool = False) -> None:
    """A local checkpoint's config names a model_type transformers knows, and each
    ``*.safetensors`` file is whole."""
    from transformers import __version__
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(
            f"{folder} holds no config.json, so it is not a checkpoint folder: pass the folder "
            f"save_pretrained wrote (config.json, weights, processor files)"
        )
    config = json.loads(config_file.read_text())
    model_type = config.get("model_type")
    remote = trust_remote_code and "auto_map" in config
    if not remote and model_type not in CONFIG_MAPPING:
        raise NoFamily(
            f"{config_file} names model_type {model_type!r}, which transformers {__version__} does "
            f"not know, so no vlreg plugin can serve it: check the config, or use a transformers "
            f"that has the model (vlreg is pinned to {__version__})"
        )
    for weights in sorted(folder.glob("*.safetensors")):
        problem = _safetensors_problem(weights)
        if problem:
            raise OSError(
                f"{weights} is not a whole safetensors file: {problem}. The download or save was "
                f"cut short; fetch or save the checkpoint again"
            )


def _safetensors_problem(file: Path) -> str | None:
    """Why ``file`` is not a complete safetensors file, or ``None``. Reads the header only."""
    size = file.stat().st_size
    if size < 8:
        return "it is empty" if size == 0 else f"it is {size} bytes, shorter than a header"
    with open(file, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        if 8 + length > size:
            return f"its header claims {length} bytes but the file has {size}"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return "its header is not valid JSON"
    ends = [entry["data_offsets"][1] for entry in header.values() if isinstance(entry, dict) and "data_offsets" in entry]
    needed = 8 + length + max(ends, default=0)
    if needed > size:
        return f"its tensors need {needed} bytes but the file has {size}"
    return None


def text_task_fallback(config: Any, task: str, dispatch: bool) -> contextlib.AbstractContextManager:
    """Refuse or warn about a text-generation load that no image can reach.

    Where transformers has no causal-LM class for the config, its text-generation
    pipeline loads the wrapper itself, with a tokenizer and no processor; that cannot
    be built lazily. Where the causal-LM class of a vision-language config is the
    wrapper (Gemma 3's), the load is the same but can be lazy. Either way it is
    warned about. Returns a context that silences the pipeline's own complaint about
    a missing class, which lists every causal-LM class and says nothing useful here.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    if task != TEXT:
        return contextlib.nullcontext()
    quiet: contextlib.AbstractContextManager = contextlib.nullcontext()
    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        if getattr(config, "vision_config", None) is None:
            return quiet
        loaded = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)].__name__
        what = f"{TEXT!r} loads {config.model_type!r} as {loaded}"
    elif not dispatch:
        raise ValueError(
            f"transformers has no text-only class for {config.model_type!r}, so it cannot "
            f"be built lazily for {TEXT!r}: load with task={IMAGE_TEXT!r} (the wrapper "
            f"with its processor), or with dispatch=True (the wrapper, text prompts only)."
        )
    else:
        what = f"transformers has no text-only class for {config.model_type!r}: loading the wrapper"
        quiet = _silenced(logging.getLogger("transformers.pipelines.base"))
    warnings.warn(
        f"{what} with a tokenizer and no processor, so no image reaches the model. "
        f"Load with task={IMAGE_TEXT!r} to trace images.",
        stacklevel=3,
    )
    return quiet


@contextlib.contextmanager
def _silenced(logger: logging.Logger) -> Iterator[None]:
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
