"""What a test needs to load a checkpoint and prompt it, said once for vlreg's tests and a
family plugin's: `load` a built checkpoint (or a folder) as a user loads one, and `chat`,
a one-turn prompt written by the model's own chat template."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .checkpoints import build

#: The question `chat` asks unless told another.
QUESTION = "What is in this image?"

#: How `load` loads unless told otherwise: images traced, the weights in memory on the CPU,
#: eager attention (the attention interior is served only under it).
LOAD = {"task": "image-text-to-text", "dispatch": True, "device": "cpu", "attn_implementation": "eager"}


def load(checkpoint: "str | os.PathLike", overrides: dict | None = None, **options: Any) -> Any:
    """A `StandardizedTransformer` of ``checkpoint``: a builder's name (``"qwen2_vl"``,
    built by `build` with ``overrides``) or a checkpoint folder, loaded with `LOAD`'s
    options under ``options`` (``attn_implementation="sdpa"``, ``task=None`` for text
    generation, ``dtype=torch.bfloat16``)."""
    from ..core.model import StandardizedTransformer

    path = Path(checkpoint)
    if not path.is_dir():
        path = build(str(checkpoint), **(overrides or {}))
    elif overrides:
        raise ValueError(f"overrides go to a builder: {checkpoint} is a folder, not a builder's name")
    return StandardizedTransformer(str(path), **{**LOAD, **options})


def chat(model: Any, *content: "str | dict", text: str | None = QUESTION, images: int = 1, generation: bool = True) -> str:
    """One user turn through the model's chat template (the processor's, else the
    tokenizer's): ``images`` image placeholders, or the ``content`` items given (a string
    is an item's type, ``"video"``; a dict is an item as it stands), then ``text`` (none
    where it is None); with the assistant's turn opened unless ``generation=False``."""
    items = [{"type": item} if isinstance(item, str) else item for item in content] or [{"type": "image"}] * images
    if text is not None:
        items.append({"type": "text", "text": text})
    owner = model.processor if getattr(model.processor, "chat_template", None) else model.tokenizer
    return owner.apply_chat_template([{"role": "user", "content": items}], add_generation_prompt=generation, tokenize=False)
