"""Where a skeleton's small checkpoint gets its processor when its source has none.

A folder holding only ``config.json`` (a hub checkpoint's config copied alone) is enough
to survey, but a checkpoint a test loads needs the family's tokenizer, image processor
and chat template. They are borrowed, once, when the skeleton is written: from a tiny
checkpoint an installed plugin builds for the same family (``vlreg_checkpoints``, asked of
disabled plugins too, since the skeleton is usually written to replace one), or from a
folder the author names. They are copied into the skeleton's package, with the config
fields that must agree with them (token ids, vocabulary, image geometry), so the
skeleton's tests need nothing but itself and its source.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from attrs import frozen


@frozen
class Borrowed:
    """A processor to copy, where it comes from (a sentence), and the config fields that
    must agree with it (`vlreg.testing.shrink.agreeing`)."""

    folder: Path
    origin: str
    agree: dict
    built: bool = False  # a folder built here, removed by `release`


def borrow(config: Any, processor: str | Path | None = None) -> Borrowed | None:
    """The processor for a source whose config is ``config``: the folder ``processor``,
    else a tiny checkpoint of the same family an installed plugin builds (the one whose
    text and vision parts match too, if any). ``None`` if there is none. The folder of a
    built checkpoint is temporary: `copy` it, then `release` it."""
    from transformers import AutoConfig

    from ..testing.shrink import agreeing

    if processor is not None:
        folder = Path(processor)
        return Borrowed(folder, f"the folder {folder}", agreeing(AutoConfig.from_pretrained(folder)))
    parts = _parts(config)
    fallback = None
    for origin, builder in _builders(config.model_type):
        folder = Path(tempfile.mkdtemp(prefix="vlreg-borrow-"))
        try:
            builder(folder)
            built = AutoConfig.from_pretrained(folder)
        except Exception:  # a builder that cannot build here lends nothing
            shutil.rmtree(folder, ignore_errors=True)
            continue
        found = Borrowed(folder, origin, agreeing(built), built=True)
        if _parts(built) == parts:
            if fallback is not None:
                release(fallback)
            return found
        if fallback is None:
            fallback = found
        else:
            release(found)
    return fallback


def _parts(config: Any) -> tuple:
    vision = getattr(config, "vision_config", None)
    return config.model_type, config.get_text_config().model_type, getattr(vision, "model_type", None)


def _builders(model_type: str) -> Iterator[tuple[str, Any]]:
    """Builders of installed plugins that claim the wrapper ``model_type``, loaded or
    not: one named after the family first."""
    from ..core.host import plugins

    for described, plugin in _plugins():
        if ("wrapper", model_type) not in {(claim.kind, claim.model_type) for claim in plugins.claims_of(plugin)}:
            continue
        builders = plugins.ask(plugin, "vlreg_checkpoints") or {}
        for name in sorted(builders, key=lambda name: name != model_type):
            yield f"the tiny checkpoint {name!r} of {described}", builders[name]


def _plugins() -> list[tuple[str, Any]]:
    from ..core.host import plugins

    found = {id(plugin): (plugins.describe(plugin), plugin) for plugin in plugins.plugin_manager().get_plugins()}
    for entry_point in plugins._entry_points():
        try:
            module = entry_point.load()
        except Exception:  # a plugin that cannot import lends nothing
            continue
        dist = f"{entry_point.dist.name} {entry_point.dist.version}" if entry_point.dist else "registered by hand"
        found.setdefault(id(module), (f"plugin {entry_point.name!r} ({dist})", module))
    return list(found.values())


def takes_turns(folder: str | Path) -> bool:
    """Whether the chat template of the processor in ``folder`` takes a conversation of
    turns, as the conformance suite writes its prompts (an image reaches the prompt);
    a base model's takes one list of content instead (Qwen2-VL-2B's)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(folder)
    token = getattr(processor, "image_token", None)
    if not getattr(processor, "chat_template", None) or token is None:
        return True
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "?"}]}]
    try:
        return token in processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except Exception:  # a template that refuses turns
        return False


def copy(borrowed: Borrowed, into: Path) -> None:
    """Save the borrowed processor (and generation config) into the folder ``into``."""
    from transformers import AutoProcessor

    AutoProcessor.from_pretrained(borrowed.folder).save_pretrained(into)
    generation = borrowed.folder / "generation_config.json"
    if generation.exists():
        shutil.copy(generation, into / "generation_config.json")


def release(borrowed: Borrowed) -> None:
    """Remove the folder of a checkpoint built to borrow from (not an author's folder)."""
    if borrowed.built:
        shutil.rmtree(borrowed.folder, ignore_errors=True)
