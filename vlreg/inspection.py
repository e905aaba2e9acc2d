"""``vlreg inspect``: what a checkpoint's load would serve, its sizes and its weights' bytes,
read from the config alone (a meta-device build)."""

from __future__ import annotations

import json
from typing import Any


PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


class _NoProcessorFiles:
    """Stands in for the processor of a folder that holds only a config, so the report
    shows what a load with its processor serves; nothing is ever processed with it."""


def inspect(checkpoint: str, task: str, attn_implementation: str | None, as_json: bool) -> int:
    """``vlreg inspect``: `report` printed as JSON, or as `described`."""
    found = report(checkpoint, task, attn_implementation)
    print(json.dumps(found, indent=2) if as_json else described(checkpoint, found))
    return 0


def report(checkpoint: str, task: str = "image-text-to-text", attn_implementation: str | None = None) -> dict:
    """What ``vlreg inspect`` reports of a checkpoint, built on the meta device from its config:
    no weights are read, and no processor is needed (a folder holding only ``config.json`` is
    inspected as well)."""
    import warnings
    from pathlib import Path

    from . import StandardizedTransformer
    from .core.host import plugins

    options: dict[str, Any] = {}
    folder = Path(checkpoint)
    bare = task == "image-text-to-text" and folder.is_dir() and not any((folder / f).exists() for f in PROCESSOR_FILES)
    if bare:
        options["processor"] = _NoProcessorFiles()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StandardizedTransformer(
            checkpoint, task=task, dispatch=False, attn_implementation=attn_implementation, **options
        )
    vision = model.__dict__.get("vision")
    found = {
        "model_type": model.family.parts["wrapper"].model_type,
        "family": model.family.name,
        "parts": {kind: {"model_type": part.model_type, "plugin": plugins.describe(model.family.plugins[kind])}
                  for kind, part in model.family.parts.items()},
        "class": type(model._module).__name__,
        **_weights(model),
        "aliases": {"model": model._aliases, "layers[0]": model.layers[0]._aliases},
        "sizes": {name: _size(model, name) for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "vocab_size")},
        "support": model.support(),
        "read_only": model.read_only(),
    }
    if model.cross_attention_layers:
        found["cross_attention_layers"] = model.cross_attention_layers
    if bare:
        found["note"] = "the folder holds no processor files: support() is what a load with the checkpoint's processor serves"
    if vision is not None:
        found["aliases"]["vision"] = vision._aliases
        if vision.num_layers:  # a vision part may have no blocks (Gemma 4 unified's embedder)
            found["aliases"]["vision.layers[0]"] = vision.layers[0]._aliases
        found["vision sizes"] = _sizes(vision)
        found["no_images"] = vision.no_images()
    return found


def described(checkpoint: str, report: dict) -> str:
    """A `report` as ``vlreg inspect`` prints it without ``--json``."""
    from .demo import format_support

    lines: list[str] = []
    lines.append(f"{checkpoint}: model type {report['model_type']!r} ({report['class']}), family {report['family']!r}")
    for kind, part in report["parts"].items():
        lines.append(f"  {kind}: {part['model_type']} served by {part['plugin']}")
    tower = f"; the vision part {_count(report['vision parameters'])}" if "vision parameters" in report else ""
    lines.append(f"parameters: {report['parameters']:,} ({_count(report['parameters'])}{tower})")
    stored = f"; the config's dtype is {report['config dtype']}" if report["config dtype"] else ""
    lines.append("weights: " + ", ".join(f"{_gib(size)} in {dtype}" for dtype, size in report["weight bytes"].items())
          + f"{stored} (activations, and a generation's cache, come on top)")
    for where, aliases in report["aliases"].items():
        lines.append(f"aliases on {where}: {aliases}")
    lines.append("sizes: " + ", ".join(f"{k} {v}" for k, v in report["sizes"].items()))
    if "cross_attention_layers" in report:
        lines.append(f"cross-attention blocks (the image reaches only these): {report['cross_attention_layers']}")
    if "vision sizes" in report:
        lines.append("vision sizes: " + ", ".join(f"{k} {v}" for k, v in report["vision sizes"].items()))
    if "note" in report:
        lines.append(f"note: {report['note']}")
    lines.append("support():")
    lines.append(format_support(report["support"]))
    if report["read_only"]:
        lines.append("read_only() (served, but a write would not reach the model):")
        lines.append("\n".join(f"  {row}: {reason}" for row, reason in report["read_only"].items()))
    return "\n".join(lines)



#: Bytes per parameter of the dtypes a report gives the weights' memory in.
WEIGHT_BYTES = {"bfloat16": 2, "float32": 4}


def _weights(model: Any) -> dict[str, Any]:
    """The parameters of the model built on meta (each shared tensor, tied embeddings,
    once) and what they take in each of `WEIGHT_BYTES`: the memory the weights alone
    need on a device, whatever the files hold."""
    total = sum(parameter.numel() for parameter in model._module.parameters())
    found: dict[str, Any] = {"parameters": total}
    vision = model.__dict__.get("vision")
    if vision is not None:
        found["vision parameters"] = sum(parameter.numel() for parameter in vision._module.parameters())
    found["weight bytes"] = {dtype: total * size for dtype, size in WEIGHT_BYTES.items()}
    dtype = getattr(model._module.config, "dtype", None)
    found["config dtype"] = str(dtype).removeprefix("torch.") if dtype is not None else None
    return found


def _count(number: int) -> str:
    """``8291375616`` as ``8.29 B``."""
    for size, unit in ((10**9, "B"), (10**6, "M"), (10**3, "K")):
        if number >= size:
            return f"{number / size:.3g} {unit}"
    return str(number)


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def _sizes(vision: Any) -> dict[str, Any]:
    from .core.errors import Unavailable

    sizes = {}
    for name in ("num_layers", "vision_hidden_size", "num_heads", "head_dim", "intermediate_size",
                 "patch_size", "image_size", "spatial_merge_size", "window_size"):
        try:
            sizes[name] = getattr(type(vision), name).__get__(vision)
        except Unavailable:
            sizes[name] = "variable (per image)" if name == "image_size" else None  # None: the part has none
        except AttributeError:
            continue
    return sizes


def _size(model: Any, name: str) -> Any:
    """A text size, or None where the blocks differ in it (each block's says)."""
    from .core.errors import Unavailable

    try:
        return getattr(model, name)
    except Unavailable:
        return None
