"""A small random-weight copy of a checkpoint folder, for families with no builder of their own.

The copy keeps the folder's tokenizer, processor and chat template (so its token ids and
prompt format are the real ones) and its config's structure, with every width and depth
cut down; the weights are random. Only the config and the processor files are read: the
folder needs no weights, so a hub checkpoint's metadata is enough.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Config fields set on a text config, where it has them.
TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
#: Config fields set on a vision config, where it has them (the image and patch sizes
#: stay: the processor cuts images for them).
VISION = {
    "hidden_size": 32,
    "embed_dim": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "depth": 2,
    "num_attention_heads": 2,
    "num_heads": 2,
}


def shrink(config: Any, text: dict | None = None, vision: dict | None = None) -> Any:
    """``config`` with the text and vision parts' widths and depths cut (in place)."""
    _set(config.get_text_config(), {**TEXT, **(text or {})})
    vision_config = getattr(config, "vision_config", None)
    if vision_config is not None:
        _set(vision_config, {**VISION, **(vision or {})})
    return config


def _set(config: Any, fields: dict) -> None:
    for name, size in fields.items():
        if getattr(config, name, None) is not None:
            setattr(config, name, size)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None and getattr(config, "num_hidden_layers", None) is not None:
        config.layer_types = list(layer_types)[: config.num_hidden_layers]


def small_copy(source: str | Path, path: str | Path, *, text: dict | None = None, vision: dict | None = None) -> Path:
    """Write a small random-weight copy of the checkpoint folder ``source`` to ``path``."""
    from transformers import AutoConfig, AutoProcessor

    from .checkpoints import save

    source = Path(source)
    config = shrink(AutoConfig.from_pretrained(source), text, vision)
    return save(path, config, AutoProcessor.from_pretrained(source), source / "generation_config.json")
