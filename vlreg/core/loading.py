"""What a load checks before nnsight and transformers are asked for anything.

A checkpoint that cannot load should say so at once and in a user's terms: a task vlreg
does not load, a local folder that is not there (rather than half a minute of hub
retries and a message about repo ids), a hub id with no hub in reach and no copy in the
hub cache, a ``model_type`` transformers does not know, a folder with a config and no
weights, a weights file cut short (at load, not at the first trace of a lazy build), a
text-generation load no image can reach (`tasks`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
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

#: Where transformers loads a checkpoint's weights from, in the order it looks.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")

#: How long the check that the hub answers waits (seconds): an answer takes well under
#: a second where there is a network; without one it fails at once or times out.
HUB_TIMEOUT = 3.0


def check_task(task: str) -> None:
    """Refuse a task vlreg does not load, naming the ones it does."""
    if task in (TEXT, IMAGE_TEXT):
        return
    close = difflib.get_close_matches(str(task), (TEXT, IMAGE_TEXT), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(
        f"task={task!r} is not a task vlreg loads: {hint}it takes {TEXT!r} (the default: text prompts, "
        f"the causal-LM class) or {IMAGE_TEXT!r} (the wrapper with its processor, the way images reach the model)"
    )


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


#: Files a tokenizer loads from (any one of them), and an image processor's configs.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "tekken.json")
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def check_preprocessors(checkpoint: Any, task: str, kwargs: dict) -> None:
    """A local folder holds what the task loads besides the weights: a tokenizer, and for
    images an image processor's config. Raises `FileNotFoundError` naming the files
    transformers looks for (its own error names one file, or under text generation asks
    for sentencepiece), unless the load is given them (``processor=``, ``tokenizer=``)."""
    folder = local_folder(checkpoint)
    if folder is None or kwargs.get("processor") is not None or kwargs.get("tokenizer") is not None:
        return
    needed = [("a tokenizer", TOKENIZER_FILES)] + ([("an image processor", PROCESSOR_FILES)] if task == IMAGE_TEXT else [])
    missing = [(what, files) for what, files in needed if not any((folder / name).is_file() for name in files)]
    if missing:
        lacks = "; ".join(f"{what} ({' or '.join(files)})" for what, files in missing)
        raise FileNotFoundError(
            f"{folder} holds a config but not what task={task!r} loads beside the weights: it lacks {lacks}. Save the "
            f"processor into the folder (AutoProcessor.from_pretrained(<the checkpoint it came from>)"
            f".save_pretrained(folder)), or copy its files from the checkpoint's source"
        )


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


def hub_checkpoint(checkpoint: Any, kwargs: dict) -> Any:
    """``checkpoint`` as the load should name it: unchanged for a folder, a loaded model,
    or a hub id where the hub answers; the folder of its copy in the hub cache where
    the hub is out of reach (offline, or ``HF_HUB_OFFLINE`` set).

    Raises `ConnectionError` at once for a hub id the hub cannot serve and the cache
    does not hold, instead of transformers' half a minute of retries.
    """
    if not isinstance(checkpoint, (str, os.PathLike)) or local_folder(checkpoint) is not None:
        return checkpoint
    repo = os.fspath(checkpoint)
    offline = _offline_setting() or kwargs.get("local_files_only")
    why = "HF_HUB_OFFLINE is set" if offline else _hub_unreachable(_endpoint())
    if why is None:
        return checkpoint
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(repo, "config.json", cache_dir=kwargs.get("cache_dir"), revision=kwargs.get("revision"))
    if isinstance(cached, str):
        if not offline:
            warnings.warn(f"the hub cannot be reached ({why}): loading {repo!r} from its copy in the hub cache", stacklevel=3)
        return str(Path(cached).parent)
    where = kwargs.get("cache_dir") or _cache_dir()
    if offline:
        problem = f"{why}, so vlreg looks for {repo!r} only in the hub cache ({where}), which holds no copy of it"
        fix = "unset HF_HUB_OFFLINE to download it"
    else:
        problem = (f"{repo!r} is no folder here, so it is taken for a hub id, but the hub ({_endpoint()}) cannot "
                   f"be reached from this machine ({why}) and the hub cache ({where}) holds no copy of it")
        fix = "check the network (or HF_ENDPOINT, or a proxy)"
    raise ConnectionError(
        f"{problem}: {fix}, or download it where there is a network (hf download {repo}) and pass "
        f"the folder it is in"
    )


def _offline_setting() -> bool:
    """Whether the user asked huggingface_hub and transformers to stay offline."""
    return any(os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE") for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _endpoint() -> str:
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT", constants.ENDPOINT).rstrip("/")


def _cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


@functools.lru_cache(maxsize=None)
def _hub_unreachable(endpoint: str) -> str | None:
    """Why ``endpoint`` does not answer (no name resolution, no route, refused, no answer
    in `HUB_TIMEOUT`), or ``None``: any HTTP answer, even an error status, means a
    network. Asked once per process and endpoint; proxies set in the environment are used."""
    import ssl
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=HUB_TIMEOUT).close()
    except urllib.error.HTTPError:
        return None
    except OSError as error:  # URLError, socket errors and timeouts are all OSErrors
        reason = getattr(error, "reason", error)
        if isinstance(reason, ssl.SSLError):  # something answered; leave certificates to huggingface_hub
            return None
        return str(reason) or type(reason).__name__
    return None


def weights_to_check(checkpoint: Any, kwargs: dict) -> tuple[Path, str | None] | None:
    """The local folder a load reads weights from and the files' variant, for
    `check_weights`; ``None`` for a hub id or a loaded model, and where the weights come
    from elsewhere (``gguf_file=``, ``state_dict=``)."""
    folder = local_folder(checkpoint)
    if folder is None or any(key in kwargs for key in ("gguf_file", "state_dict")):
        return None
    return folder, kwargs.get("variant")


def check_weights(folder: Path, variant: str | None = None) -> None:
    """A folder the weights are to be loaded from holds them: the file transformers will
    read, and every shard its index names. Raises `FileNotFoundError` naming what is
    missing (a folder with a config alone is built on meta with ``dispatch=False``)."""
    names = [_with_variant(name, variant) for name in WEIGHT_FILES]
    present = [name for name in names if (folder / name).is_file()]
    if not present:
        raise FileNotFoundError(
            f"{folder} holds a config but no weights: transformers loads {names[0]} (or {names[1]} and the "
            f"shards it names, or {names[2]}), and none of them is there. Copy the weights into the folder "
            f"(was a download cut short?), or build the model on meta without them (dispatch=False; "
            f"vlreg inspect reads only the config)"
        )
    if present[0].endswith(".index.json"):
        index = folder / present[0]
        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{index} names {len(shards)} weight shards and {len(missing)} of them are not in the folder: "
                f"{', '.join(missing)}. Fetch or copy the missing shards (was a download cut short?)"
            )


def _with_variant(name: str, variant: str | None) -> str:
    """``model.safetensors`` with ``variant="fp16"`` as transformers names it: ``model.fp16.safetensors``."""
    if variant is None:
        return name
    stem, extension = name.rsplit(".", 1)
    return f"{stem}.{variant}.{extension}"


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
            f"that has the model (vlreg supports the releases its requirement allows)"
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


@contextlib.contextmanager
def lazily(config: Any, dispatch: bool) -> Iterator[None]:
    """Around the build: a lazy one (on the meta device) of a model whose constructor reads
    a tensor's value (DaViT's ``.item()`` over its drop-path rates, Florence-2's) cannot
    succeed, and is refused in words that name the way out."""
    try:
        yield
    except RuntimeError as error:
        if dispatch or "meta tensors" not in str(error):
            raise
        raise ValueError(
            f"{config.model_type!r} cannot be built lazily (dispatch=False): its transformers class reads a "
            f"tensor's value while it is built, which the meta device has not ({error}); load with dispatch=True"
        ) from error


@contextlib.contextmanager
def built_for_real(envoys: Any) -> Iterator[None]:
    """Around a lazy build (on the meta device), given the family's envoy classes: each
    function their ``built_for_real`` names by its dotted path (a function of a module,
    ``"timm.models.eva.calculate_drop_path_rates"``) runs on real tensors (nnsight's
    ``MetaDevice.real``), so a constructor that reads a tensor's value through it (timm's
    drop-path rates) builds; every other tensor stays on meta. The functions are put back
    after the build. A path whose module lacks the function (another release of the
    library) is left alone."""
    from importlib import import_module

    from nnsight.modeling.mixins.meta import MetaDevice

    paths = [path for envoy in envoys for path in getattr(envoy, "built_for_real", ())]
    replaced = []
    try:
        for path in dict.fromkeys(paths):
            module_name, _, name = path.rpartition(".")
            module = import_module(module_name)
            original = getattr(module, name, None)
            if original is None:
                continue

            @functools.wraps(original)
            def real(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                with MetaDevice.real():
                    return _original(*args, **kwargs)

            setattr(module, name, real)
            replaced.append((module, name, original))
        yield
    finally:
        for module, name, original in reversed(replaced):
            setattr(module, name, original)
