"""`Blocks`: the envoy of a standard model's lists of blocks, and the calls of looped blocks.

A looped text model (Inkling 2 Loop's) calls a run of its blocks again and again in one
forward, pass after pass, each pass reading the previous one's. A block's values then
exist once per call. vlreg serves ``layers`` as the blocks *in the order the forward
calls them* (`Blocks.unroll`): ``model.layers[i]`` is the i-th block call, so
``layers[i].layer_output`` is that pass's stream, ``num_layers`` counts calls, and every
walk over the blocks (the logit lens, the suite, `support`) goes through every pass, as
transformers' own ``hidden_states`` do. A family declares the loop on its block class
(`vlreg.core.envoys.text.Layer.passes`): a run of adjacent blocks with the same number of
passes, more than one, is called as a group, pass after pass.

Each call after the first of a looped block is a copy of the block's envoy subtree over
the same modules, pinned to its call (`Call`): its standard values, and the ``input``,
``output`` and ``inputs`` of every envoy under it, are read at that call of their location
(nnsight's occurrence of it). What is reached by ``.source`` from a looped block is
nnsight's own, read at the next call.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any, Iterator

from nnsight.intervention.envoy import Envoy
from nnsight.intervention.interleaver import Mediator

from ..serving.calls import Call, call_of


class Blocks(Envoy):
    """The envoy of every ``ModuleList`` under a standard model (``layers``,
    ``vision.layers``): an index out of range says how many blocks there are. Once
    `unroll`\\ ed, it is the blocks' calls in forward order."""

    #: How messages name it (``layers``, ``vision.layers``); set at build, else its path.
    _label = ""
    #: The block calls in forward order where a block is looped (`unroll`), else ``None``.
    _calls: list | None = None

    def unroll(self) -> None:
        """Serve the blocks as their calls in forward order, where the family's block class
        says a block runs more than one pass (`Layer.passes`); else leave them as they are."""
        blocks = list(Envoy.__iter__(self))
        passes = [passes_of(block) for block in blocks]
        if all(count == 1 for count in passes):
            self._calls = None
            return
        calls, index = [], 0
        while index < len(blocks):
            end = index + 1
            while passes[index] > 1 and end < len(blocks) and passes[end] == passes[index]:
                end += 1
            for pass_index in range(passes[index]):
                for module_index in range(index, end):
                    call = Call(pass_index, passes[index], module_index)
                    block = blocks[module_index]
                    calls.append(_pinned(block, call) if pass_index == 0 else _copied(block, self, call))
            index = end
        self._calls = calls

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for call in self._calls or ():  # a weakref does not pickle: the calls' copies re-linked here
            if call._parent is None:
                call._parent = weakref.ref(self)

    def __len__(self) -> int:
        return super().__len__() if self._calls is None else len(self._calls)

    def __iter__(self) -> Any:
        return super().__iter__() if self._calls is None else iter(self._calls)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int) and not -len(self) <= key < len(self):
            where = f"model.{self._label}" if self._label else self.path
            count = len(self)
            last = f"{where}[0] to {where}[{count - 1}], or {where}[-1] for the last" if count else "none"
            raise IndexError(f"{where}[{key}] is out of range: there are {count} blocks ({last})")
        if self._calls is not None and isinstance(key, (int, slice)):
            return self._calls[key]
        return super().__getitem__(key)


def passes_of(block: Any) -> int:
    """How many passes a forward runs ``block`` (`Layer.passes`; 1 on any other envoy)."""
    passes = getattr(type(block), "passes", None)
    return passes(block) if callable(passes) else 1


def _pinned(envoy: Envoy, call: Call) -> Envoy:
    """``envoy`` and every envoy under it marked as ``call``."""
    envoy.__dict__["_vlreg_call"] = call
    if call.passes > 1:
        envoy.__class__ = _at_its_call(type(envoy))
    for child in envoy._children:
        _pinned(child, call)
    return envoy


def _copied(envoy: Envoy, parent: Envoy, call: Call) -> Envoy:
    """A copy of ``envoy``'s subtree over the same modules and paths, marked as ``call``:
    every attribute that named a child names the child's copy."""
    copy = object.__new__(type(envoy))
    copy.__dict__.update(envoy.__dict__)
    copy.__dict__["_parent"] = weakref.ref(parent)
    copies = {id(child): _copied(child, copy, call) for child in envoy._children}
    copy.__dict__["_children"] = [copies[id(child)] for child in envoy._children]
    copy.__dict__["_child_map"] = {name: copies.get(id(child), child) for name, child in envoy._child_map.items()}
    for name, attribute in envoy.__dict__.items():
        if isinstance(attribute, Envoy) and id(attribute) in copies:
            copy.__dict__[name] = copies[id(attribute)]
    copy.__dict__["_vlreg_call"] = call
    copy.__class__ = _at_its_call(type(envoy))
    return copy


class _AtItsCall:
    """nnsight's ``input``, ``output`` or ``inputs`` of an envoy under a looped block, read
    and written at the envoy's call (`Call`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.native = getattr(Envoy, name)

    def __reduce__(self) -> tuple:  # nnsight's eproperty does not pickle: a remote request names it
        return _AtItsCall, (self.name,)

    def __get__(self, envoy: Any, owner: Any = None) -> Any:
        if envoy is None:
            return self.native
        with _at_call(envoy, self.native._location(envoy)):
            return self.native.__get__(envoy, owner)

    def __set__(self, envoy: Any, new: Any) -> None:
        with _at_call(envoy, self.native._location(envoy)):
            self.native.__set__(envoy, new)


@contextlib.contextmanager
def _at_call(envoy: Any, location: str) -> Iterator[None]:
    try:
        mediator = Mediator.current(location)
    except ValueError:  # outside a trace: nnsight says so itself
        yield
        return
    iteration = mediator.iteration
    occurrence = call_of(envoy).occurrence(mediator)
    if occurrence is not None:
        mediator.iteration = occurrence
    try:
        yield
    finally:
        mediator.iteration = iteration


@functools.cache
def _at_its_call(klass: type) -> type:
    """``klass`` with nnsight's own ``input``, ``output`` and ``inputs`` read at the envoy's
    call (`_AtItsCall`); a standard value of those names pins itself (`value._pin`)."""
    from ..serving.reference import made_by
    from ..serving.values import value

    if getattr(klass, "_vlreg_at_its_call", False):
        return klass
    natives = {name: _AtItsCall(name) for name in ("input", "output", "inputs")
               if getattr(klass, name, None) is getattr(Envoy, name) and not isinstance(getattr(klass, name), value)}
    return type(klass.__name__, (klass,), {**natives, "_vlreg_at_its_call": True, "__qualname__": klass.__qualname__,
                                           "__module__": klass.__module__, "__doc__": klass.__doc__,
                                           **made_by(_at_its_call, klass)})
