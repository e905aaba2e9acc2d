"""A block's kinds of token mixer, declared by the block's envoy class (`Layer.mixers`).

The core knows three kinds, ``self_attn``, ``linear_attn`` and ``mamba``; a family whose
blocks mix tokens another way (LFM2's short convolution) declares its kinds on its block
class instead of the core growing a fixed list. The block's ``standard_children`` and
``order`` follow the declaration (`with_mixers`), so `support`, `walk` and the
conformance suite see the mixer; where the block holds it under another native name, the
block binds the standard name to it as it is built (`bind`).
"""

from __future__ import annotations

from typing import Any, Callable

from attrs import frozen


@frozen
class Mixer:
    """A kind of token mixer a block holds, served under ``name`` (``layers[i].<name>``).

    ``native`` is the block's own attribute that holds it, where the standard name is
    another (LFM2's short convolution, ``conv``, served as ``short_conv``): the block binds
    ``name`` to that child as it is built, on blocks of its own class only, so a module
    inside the mixer that shares the attribute's name (LFM2's ``conv.conv``, the
    convolution itself) is left alone, as a ``vlreg_rename`` key would not leave it. A
    block of the class that lacks the attribute holds another of its kinds (a hybrid's
    attention block). ``None``: the block holds the mixer at ``name`` already, or the part's
    ``vlreg_rename`` binds it there (the core's kinds, which every family renames onto).

    ``where`` (a function of the block's module) binds it on the blocks it holds for only,
    where one native attribute holds two kinds block by block (GLM-5-Next's ``self_attn``,
    a linear mixer on ``"linear_attention"`` blocks): there the native name, another kind's
    standard name, is the block's no more.
    """

    name: str
    native: str | None = None
    where: Callable[[Any], bool] | None = None


def with_mixers(entries: list[str], inherited: list[str], names: list[str]) -> list[str]:
    """``entries`` (a block class's children or order) with the ``inherited`` mixers' names
    replaced by ``names``, where the first of them stood (else before the ``mlp``, else at
    the end): a subclass's own entries stay where it put them."""
    kept = [entry for entry in entries if entry not in inherited]
    at = next((i for i, entry in enumerate(entries) if entry in inherited), None)
    if at is None:
        at = kept.index("mlp") if "mlp" in kept else len(kept)
    else:
        at -= sum(1 for entry in entries[:at] if entry in inherited)
    return [*kept[:at], *names, *kept[at:]]


def bind(block: Any, mixer: Mixer) -> None:
    """Serve ``block``'s child at ``mixer.native`` as ``mixer.name``: an alias, as nnsight's
    ``rename`` binds one (the same envoy under a second name, recorded in ``_aliases`` so
    the repr shows both). A name the block already holds is an error, not a shadow."""
    child = block._child_map.get(mixer.native)
    if child is None or block.__dict__.get(mixer.name) is child:
        return
    if mixer.where is not None and not mixer.where(block._module):
        return
    if mixer.name in block.__dict__ or hasattr(block._module, mixer.name):
        raise ValueError(
            f"{type(block).__name__} declares its {mixer.native} as the mixer {mixer.name!r}, but "
            f"{block.path} already has a {mixer.name!r}: name the mixer otherwise"
        )
    object.__setattr__(block, mixer.name, child)
    block._aliases[mixer.name] = mixer.native
    if mixer.native in {kind.name for kind in type(block).mixers}:
        block.__dict__.pop(mixer.native, None)
