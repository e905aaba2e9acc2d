"""``vlreg new-plugin``: a plugin skeleton for a transformers vision-language family.

The skeleton is written from a survey of the model itself (`survey`): its config, from a
checkpoint folder (``config.json`` is enough; no weights), is cut down and built on the
meta device, and the module tree says where the text model, its blocks, the tower, the
projector and the scatter are. Parts an installed plugin already serves are left to it.
What the survey cannot know is a TODO comment in the generated files.

The skeleton is a distribution like the built-in families: ``pyproject.toml``, a package
that imports only `vlreg.plugin` and `vlreg.testing` (so it keeps working across vlreg
releases that keep the plugin API), a builder of a small checkpoint (`vlreg.testing.small_copy`
of the source folder), and a test that runs the conformance suite on it. A source with
no processor borrows one (`processor`), copied into the package, so the skeleton's tests
need nothing but itself and the source folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from .survey import Survey, survey
from .writing import write

__all__ = ["Survey", "survey", "write_plugin"]


def write_plugin(name: str, out: str | Path, source: str | Path, processor: str | Path | None = None) -> Path:
    """Write the plugin ``vlreg-<name>`` for the family of checkpoint folder ``source``
    into ``out``; returns its folder.

    ``processor``: a folder holding the family's tokenizer and processor, for a
    ``source`` that holds only a config (by default one is borrowed from a tiny checkpoint
    an installed plugin builds for the family, if any).
    """
    from transformers import AutoConfig

    from . import processor as lending
    from ..testing.shrink import has_processor

    found = survey(source)
    folder = Path(out) / f"vlreg-{name.replace('_', '-')}"
    package = "vlreg_" + re.sub(r"\W", "_", name)
    if folder.exists():
        raise FileExistsError(f"{folder} exists: remove it or choose another --out")
    borrowed = None
    if processor is not None or not has_processor(source):
        borrowed = lending.borrow(AutoConfig.from_pretrained(source), processor)
    with_processor = borrowed.folder if borrowed is not None else source if has_processor(source) else None
    turns = lending.takes_turns(with_processor) if with_processor is not None else True
    try:
        write(name, folder, package, found, Path(source).resolve(), borrowed, turns)
        if borrowed is not None:
            lending.copy(borrowed, folder / package / "processor")
    finally:
        if borrowed is not None:
            lending.release(borrowed)
    return folder
