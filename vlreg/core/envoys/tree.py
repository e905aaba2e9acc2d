"""The standard tree: each standard envoy's `Place` in it, and the one walk over it in
forward order (`tree`) that the places, `support`, `read_only`, `walk` and the forward
order in words all come from.

An envoy is standard when its class says what its standard children are
(``standard_children``, `Standard`'s); the walk goes through those, a list of blocks
(``layers``) entry by entry.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
from attrs import field, frozen
from nnsight.intervention.envoy import Envoy


@frozen(eq=False)
class Place:
    """Where a standard envoy sits in the standard tree, and what it sits in: given to every
    envoy of the tree, one object each, when the model is built.

    * ``row``: the prefix of its rows in `support` (``"vision.self_attn."``); the blocks of
      one stack share it;
    * ``label``: how a message names it (``"vision.layers[3].self_attn"``);
    * ``block``: the index of the block (of ``layers``, ``vision.layers``, ...) it is or is
      part of, ``None`` outside the blocks; ``stack``: the row of that block's siblings;
    * ``tower``: the `Vision` it is part of (``None`` on the text side): what the tower
      computes exists only where an image runs through it;
    * ``once``: the module it is part of that runs once a generation, before the first
      step (an encoder-decoder's `Encoder`; ``None`` elsewhere);
    * ``image_block``: the block it is part of that runs only when an image reaches the
      text model (a `CrossAttentionLayer`; ``None`` elsewhere);
    * ``entry``: where the image enters the text model (the family's `Entry`), ``None``
      where no image does.
    """

    row: str = ""
    label: str = ""
    block: int | None = None
    stack: str | None = None
    tower: Any = field(default=None, repr=False)
    once: Any = field(default=None, repr=False)
    image_block: Any = field(default=None, repr=False)
    entry: Any = field(default=None, repr=False)


@frozen
class Visit:
    """One step of the walk over the standard tree (`tree`): an envoy entered (``name``
    ``None``) or one of its values. ``row``, ``label``, ``block`` and ``stack`` are the
    envoy's (`Place`); ``within`` the standard envoys it is under, outermost first."""

    envoy: Any
    row: str
    label: str
    name: str | None = None
    block: int | None = None
    stack: str | None = None
    within: tuple = ()


def is_standard(envoy: Any) -> bool:
    """Whether ``envoy`` is a standard envoy (its class names its standard children)."""
    return isinstance(envoy, Envoy) and hasattr(type(envoy), "standard_children")


def tree(envoy: Any, row: str = "", label: str = "", block: int | None = None, stack: str | None = None,
         within: tuple = ()) -> Iterator[Visit]:
    """Every standard envoy under ``envoy`` (itself first) and every value of each, in the
    order the forward computes them.

    An envoy's ``order`` lists its values and children in forward order; an entry
    ``"child.value"`` places that value of a child there (the root's
    ``"vision.image_token_mask"``, read before the tower runs), and the child's own walk
    then leaves it out."""
    yield Visit(envoy, row, label, None, block, stack, within)
    names = envoy.values()
    children = envoy.standard_children
    placed = {entry for entry in envoy.order if "." in entry}
    inner_within = (*within, envoy)
    for entry in dict.fromkeys((*envoy.order, *names, *children)):
        head, _, rest = entry.partition(".")
        if entry in names:
            yield Visit(envoy, row, label, entry, block, stack, within)
        elif entry in children:
            for child, where, index in _children(envoy, entry, label):
                inner = stack if index is None else row + children[entry]
                for visit in tree(child, row + children[entry], where, block if index is None else index, inner,
                                  inner_within):
                    if not (visit.envoy is child and visit.name is not None and f"{entry}.{visit.name}" in placed):
                        yield visit
        elif rest and head in children and is_standard(child := envoy.__dict__.get(head)):
            yield Visit(child, row + children[head], joined(label, head), rest, block, stack, inner_within)


def entered(envoy: Any) -> Iterator[Visit]:
    """The walk's visits that enter an envoy: every standard envoy under ``envoy``."""
    return (visit for visit in tree(envoy) if visit.name is None)


def joined(label: str, name: str) -> str:
    return f"{label}.{name}" if label else name


def _children(envoy: Any, attribute: str, label: str) -> Iterator[tuple[Any, str, int | None]]:
    """The standard child ``attribute`` of ``envoy`` (one, or each block of a list), with
    its label and its index among the blocks (``None`` for a single child)."""
    child = envoy.__dict__.get(attribute)
    where = joined(label, attribute)
    if child is None:
        return
    if is_standard(child):
        yield child, where, None
        return
    if not isinstance(getattr(child, "_module", None), torch.nn.ModuleList):
        raise TypeError(_unmapped(envoy, where, child))
    for index, entry in enumerate(child):
        if not is_standard(entry):
            raise TypeError(_unmapped(envoy, f"{where}[{index}]", entry))
        yield entry, f"{where}[{index}]", index


def _unmapped(envoy: Any, where: str, child: Envoy) -> str:
    family = envoy.root.family
    return (
        f"{where} is a {type(child._module).__name__} that no plugin of the "
        f"{family.name!r} family maps to a standard envoy class: add it to the "
        f"plugin's vlreg_envoys."
    )
