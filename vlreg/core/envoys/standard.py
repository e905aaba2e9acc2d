"""`Standard`, the base of every standard envoy: its standard names and how a message
names them, and which of its values this load can serve and which it can write.

Where it sits in the standard tree is its `Place` (`vlreg.core.envoys.tree`); what it and
everything under it serves is `Supported`'s (`vlreg.core.envoys.support`).
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar, Mapping

from nnsight.intervention.envoy import Envoy

from ..errors import Unavailable
from ..serving.reference import ByReference
from ..serving.refusals import refusal
from ..serving.values import value
from .support import Supported
from .tree import Place


class UnknownName(AttributeError):
    """A name an envoy has neither as a value nor as a module. Its message (the refusal,
    or the closest standard names) is written when it is read: ``hasattr`` and
    ``getattr(..., default)`` ask envoys for absent names thousands of times a build."""

    def __init__(self, envoy: "Standard", name: str) -> None:
        super().__init__(name, name=name, obj=envoy)

    def __str__(self) -> str:
        return self.obj._unknown(self.name)

    def __reduce__(self) -> tuple:  # travels (to a test worker, from a server) as its message
        return AttributeError, (str(self),)


class Standard(Supported, ByReference, Envoy):
    """Base of vlreg's envoys: standard values that refuse, with a reason, to be read
    where this load cannot serve them, or written where a write would not land.

    ``place`` is where it sits in the standard tree (`Place`), given it when the model is
    built.
    """

    #: Standard children walked by `support`: attribute -> prefix of their rows.
    standard_children: ClassVar[dict[str, str]] = {}
    #: Values and children in the order the forward computes them; `support` lists
    #: rows in this order (what it leaves out follows). An entry ``"child.value"`` places
    #: that value of a standard child there, ahead of or after the child's other values
    #: (the root's ``"vision.image_token_mask"``, read before the tower runs).
    order: ClassVar[tuple[str, ...]] = ()
    #: Whether the module's forward must be source-instrumented at build, because a
    #: value is read at an operation inside it.
    sourced: ClassVar[bool] = False
    #: Functions (dotted paths, ``"timm.models.eva.calculate_drop_path_rates"``) that the
    #: module's class calls while it is built and that read a tensor's value (timm's
    #: drop-path rates: ``.item()`` over a ``linspace``), which nnsight's lazy build on the
    #: meta device cannot: a lazy build runs each of them on real tensors
    #: (`vlreg.core.loading.built_for_real`), so ``dispatch=False`` and ``vlreg inspect`` work.
    built_for_real: ClassVar[tuple[str, ...]] = ()
    #: What of this class's own values is not served, and why (`vlreg.core.serving.refusals`):
    #: ``{value: reason or reasons}``, a reason a sentence, a predicate of the envoy, a `Gate`
    #: of the read or a `read_only` one. A class that redefines a value states its reasons
    #: with it (an inherited value keeps its class's).
    refuses: ClassVar[Mapping[str, Any]] = {}

    #: Whether this envoy's module runs once a generation, before its first step (an
    #: encoder-decoder's encoder, `Encoder`): every envoy under one has it as its place's
    #: ``once``, and its values are refused at later steps with its `later_step`.
    runs_once: ClassVar[bool] = False
    #: Where it sits in the standard tree; the root's until the model is built.
    place: Place = Place()

    @property
    def block_index(self) -> int | None:
        """The index of the block (of ``layers`` or ``vision.layers``) this envoy is, or is
        part of; ``None`` outside the blocks. What a per-block predicate asks."""
        return self.place.block

    @property
    def pass_index(self) -> int:
        """Which pass of its loop this block call is (`vlreg.core.envoys.blocks`), counted
        from 0; 0 outside a looped block."""
        call = self.__dict__.get("_vlreg_call")
        return 0 if call is None else call.pass_index

    @property
    def module_index(self) -> int | None:
        """The index of the block *module* this envoy is or is part of, in the text
        model's list: `block_index` but where ``layers`` are a looped model's calls
        (`vlreg.core.envoys.blocks`), whose calls of one block share it."""
        call = self.__dict__.get("_vlreg_call")
        return self.place.block if call is None else call.module_index

    def __getattr__(self, name: str) -> Any:
        """nnsight's lookup (this envoy's module, its submodules), and where that fails
        a message that names the standard names closest to ``name``."""
        try:
            return super().__getattr__(name)
        except AttributeError as error:
            if name.startswith("_") or "_module" not in self.__dict__ or hasattr(type(self), name):
                raise  # a value's own AttributeError, or Python asking about a protocol
            raise UnknownName(self, name) from error

    def standard_names(self) -> list[str]:
        """The standard names on this envoy: its values, its standard children present
        on this load, the aliases its family gives it, and its sizes."""
        sizes = [
            name for klass in type(self).__mro__ if issubclass(klass, Standard) and klass is not Standard
            for name, attribute in vars(klass).items() if isinstance(attribute, property) and not name.startswith("_")
        ]
        children = [name for name in self.standard_children if self.__dict__.get(name) is not None]
        aliases = [name for name in self.__dict__.get("_aliases", {}) if not name.startswith("E_")]
        return list(dict.fromkeys([*self.values(), *children, *aliases, *sizes]))

    def _unknown(self, name: str) -> str:
        where = f"model.{self.place.label}" if self.place.label else "model"
        refused = refusal(self, name)  # a standard child, or a name, the refusal table refuses here
        if refused:
            return f"{where}.{name} is not served: {refused}"
        if name in self.standard_children:
            return f"{where}.{name} is absent on this load: its family binds no {name} on {type(self._module).__name__}"
        names = self.standard_names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(found) for found in close)}? " if close else ""
        return (f"{where} has no value or module {name!r}: {hint}its standard names are {', '.join(names)} "
                f"(repr({where}) describes them; native modules keep their own names)")

    @classmethod
    def values(cls) -> list[str]:
        """The names of this class's standard values, in forward order (a value a subclass
        sets to ``None`` is not one of its names)."""
        names: dict[str, None] = {}
        for klass in reversed(cls.__mro__):
            for name, attribute in vars(klass).items():
                if isinstance(attribute, value):
                    names[name] = None
                elif attribute is None:
                    names.pop(name, None)
        ordered = [name for name in cls.order if name in names]
        return ordered + [name for name in names if name not in ordered]

    def label(self, name: str) -> str:
        """How a message names value ``name`` here (``layers[1].self_attn.attention_output``)."""
        label = self.place.label
        return f"{label}.{name}" if label else name

    def why_unavailable(self, name: str) -> str | None:
        """``None`` if this load can serve ``name`` here (a value, a standard child), else
        the reason (`refusal`, asked of the load)."""
        return refusal(self, name)

    def why_read_only(self, name: str) -> str | None:
        """``None`` if a write to ``name`` here reaches the model, else why not and what
        to edit instead."""
        return refusal(self, name, write=True)

    def refuse(self, name: str) -> None:
        """Raise `Unavailable` if ``name`` cannot be served here, by this load, on this
        trace's input (a tower value on a prompt that carries no image), or at this step of
        a generation: the refusal table's first reason (`refusal`, asked of the read)."""
        reason = refusal(self, name, run=True)
        if reason is not None:
            raise Unavailable(f"{self.label(name)} is unavailable: {reason}")

    @property
    def run(self) -> Any:
        """What the host knows of the current (or last) trace's batch (`Run`): its inputs,
        each invoke's rows, whether it generates. One object for the whole model."""
        return self.root._run
