"""Sizes of a stack of blocks, read off the blocks' own modules.

A config's sizes can disagree with the modules it built: LFM2's ``block_auto_adjust_ff_dim``
makes every MLP wider than ``intermediate_size`` says, and a mixture-of-experts model may
never build the dense width its config names. The root's sizes (``model.intermediate_size``,
``model.vision.head_dim``, ...) are therefore what every block that has the part agrees on
(each block's envoy class reads its module, and a plugin's class can say where its width
is); where blocks differ, the root's size is `Unavailable`, naming the widths and where to
read each; where no block says, the config's.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import Unavailable


def agreed(blocks: Any, part: str, name: str, label: str, fallback: Callable[[], Any]) -> Any:
    """``name`` of ``part`` (``"self_attn"``, ``"mlp"``) on every block of ``blocks`` that
    has it, where they agree; `Unavailable` where they differ; ``fallback()`` where none
    says (no block has the part, or none can tell)."""
    found: dict[int, list[int]] = {}
    for index, block in enumerate(blocks or ()):
        envoy = block.__dict__.get(part)
        if envoy is None:
            continue
        try:
            size = getattr(envoy, name)
        except Unavailable:
            continue
        found.setdefault(int(size), []).append(index)
    if len(found) > 1:
        widths = "; ".join(f"{size} on blocks {indices}" for size, indices in sorted(found.items()))
        raise Unavailable(
            f"{label} is unavailable: the blocks' {part}s differ in it ({widths}); read each block's "
            f"{part}.{name}"
        )
    return next(iter(found)) if found else fallback()
