"""`Standard`, the base of every standard envoy: its standard names and how a message
names them, and which of its values this load can serve and which it can write.

Where it sits in the standard tree is its `Place` (`vlreg.core.envoys.tree`); what it and
everything under it serves is `Supported`'s (`vlreg.core.envoys.support`).
"""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

from nnsight.intervention.envoy import Envoy

from ..errors import Unavailable
from ..serving.reference import ByReference
from ..serving.values import value
from .support import Supported
from .tree import Place


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
    #: Values read at a call the prefill makes and a cached generation's later steps do not
    #: (a convolution or a chunked scan, where each later token runs a cached update
    #: instead): refused at those steps, unless the generation runs without a cache.
    prefill_only: ClassVar[tuple[str, ...]] = ()
    #: How that refusal says what runs instead: what each later step runs, the call the
    #: values are read at, and what ``use_cache=False`` runs over the whole sequence.
    later_steps_run: ClassVar[tuple[str, str, str]] = ("a cached update", "the call", "the module")

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

    def __getattr__(self, name: str) -> Any:
        """nnsight's lookup (this envoy's module, its submodules), and where that fails
        a message that names the standard names closest to ``name``."""
        try:
            return super().__getattr__(name)
        except AttributeError as error:
            if name.startswith("_") or "_module" not in self.__dict__ or hasattr(type(self), name):
                raise  # a value's own AttributeError, or Python asking about a protocol
            raise AttributeError(self._unknown(name)) from error

    def standard_names(self) -> list[str]:
        """The standard names on this envoy: its values, its standard children present
        on this load, the aliases its family gives it, and its sizes."""
        sizes = [
            name for klass in type(self).__mro__ if issubclass(klass, Standard)
            for name, attribute in vars(klass).items() if isinstance(attribute, property) and not name.startswith("_")
        ]
        children = [name for name in self.standard_children if self.__dict__.get(name) is not None]
        aliases = [name for name in self.__dict__.get("_aliases", {}) if not name.startswith("E_")]
        return list(dict.fromkeys([*self.values(), *children, *aliases, *sizes]))

    def _unknown(self, name: str) -> str:
        where = f"model.{self.place.label}" if self.place.label else "model"
        if name in self.standard_children:
            refused = self._refused_child(name)
            if refused:
                return f"{where}.{name} is not served: {refused}"
            return f"{where}.{name} is absent on this load: its family binds no {name} on {type(self._module).__name__}"
        names = self.standard_names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(found) for found in close)}? " if close else ""
        return (f"{where} has no value or module {name!r}: {hint}its standard names are {', '.join(names)} "
                f"(repr({where}) describes them; native modules keep their own names)")

    def _refused_child(self, name: str) -> str | None:
        """Why the family's claims refuse this envoy's standard child ``name`` (a row of
        `Claim.refuses`: FastVLM's ``"vision.layers"``), or ``None``: what reading the unbound
        child says, and what a helper needing it says."""
        family = getattr(self.root, "family", None)
        return family.refuses.get(self.place.row + name) if family is not None else None

    @classmethod
    def values(cls) -> list[str]:
        """The names of this class's standard values, in forward order."""
        names: dict[str, None] = {}
        for klass in reversed(cls.__mro__):
            for name, attribute in vars(klass).items():
                if isinstance(attribute, value):
                    names[name] = None
        ordered = [name for name in cls.order if name in names]
        return ordered + [name for name in names if name not in ordered]

    def label(self, name: str) -> str:
        """How a message names value ``name`` here (``layers[1].self_attn.attention_output``)."""
        label = self.place.label
        return f"{label}.{name}" if label else name

    def why_unavailable(self, name: str) -> str | None:
        """``None`` if this load can serve ``name`` here, else the reason."""
        for gate in (self.place.tower, self.place.image_block):
            reason = gate.no_images() if gate is not None else None
            if reason:
                return reason
        return self._ask(name, "unavailable")

    @property
    def run(self) -> Any:
        """What the host knows of the current (or last) trace's batch (`Run`): its inputs,
        each invoke's rows, whether it generates. One object for the whole model."""
        return self.root._run

    def why_read_only(self, name: str) -> str | None:
        """``None`` if a write to ``name`` here reaches the model, else why not and what
        to edit instead."""
        return self._ask(name, "read_only")

    def _ask(self, name: str, table: str) -> str | None:
        own = getattr(getattr(type(self), name), table)
        family = getattr(self.root, "family", None)
        extra = family.predicates(table, self.place.row + name) if family is not None else ()
        for predicate in ((own,) if own else ()) + extra:
            reason = predicate(self)
            if reason:
                return reason
        return None

    def refuse(self, name: str) -> None:
        """Raise `Unavailable` if ``name`` cannot be served here, by this load or on this
        trace's input (a tower value on a prompt that carries no image), or at this step
        of a generation (`prefill_only`)."""
        reason = self.why_unavailable(name) or self._why_not_in_this_run(getattr(type(self), name))
        if reason is not None:
            raise Unavailable(f"{self.label(name)} is unavailable: {reason}")
        if name not in self.prefill_only:
            return
        from nnsight.intervention.interleaver import Mediator

        step = Mediator.current(self.label(name)).iteration
        if step and self.run.inputs.get("use_cache", True) is not False:
            instead, call, whole = self.later_steps_run
            raise Unavailable(
                f"{self.label(name)} is unavailable at step {step}: after the prefill each token runs {instead}, "
                f"not {call} it is read at; read it at the prefill (step 0), or generate with use_cache=False, "
                f"which runs {whole} over the whole sequence at every step"
            )

    def _why_not_in_this_run(self, served: Any) -> str | None:
        """Why this trace's input (this invoke's rows, when several invokes are batched)
        lacks ``served``: no image where it needs one, or a tower value with images in
        several invokes, whose share of the tower no family declares."""
        from nnsight.intervention.interleaver import Mediator

        mediator = Mediator.current(served.name)
        batcher = getattr(mediator.interleaver, "batcher", None)
        group = mediator.batch_group if batcher is not None and batcher.batching else None
        run = self.run
        place = self.place
        if place.once is not None and mediator.iteration:
            return place.once.later_step(mediator.iteration)
        steps = getattr(self.root.family.entry, "steps", None)
        if steps is not None and run.generating and served._location(self) == f"{self.root.path}.input":
            return (
                f"under generate this wrapper's generate never calls its own forward (it runs the image's steps "
                f"itself, then steps model.{steps}), so the model's inputs are never reached; read it in a trace"
            )
        needs = served.needs_images
        if (place.tower is not None or place.image_block is not None) if needs is None else needs:
            reason = self.root.no_images_in_this_run(group)
            if reason and place.image_block is not None:
                return f"{reason}; {place.image_block.skipped}"
            if reason:
                return reason
            step = mediator.iteration
            if (place.tower is not None or needs) and step and run.inputs.get("use_cache", True) is not False:
                # the value's module is never called at this step: nnsight would wait for it
                # to the end of the run, cutting the loop short and losing the step's values
                # (not a cross-attention block's: it runs at every step, on cached keys)
                return (
                    f"this is a generation step after the first (step {step}): the image is read at the first "
                    "step only, and after it the prompt's tokens, the image's among them, are in the cache, so "
                    "the tower and the scatter do not run; read image values at the first step (before "
                    "tracer.iter, or at tracer.iter[0])"
                )
        if run.replaying and served.layout_on(self) == "tower":
            return "this trace replays the tower's cached output (TowerCache.replay), so the tower does not run"
        if group is not None and served.layout_on(self) == "tower" and run.invokes_with_images() > 1:
            return (
                "images in several invokes run through the tower together, and which of its rows are "
                "this invoke's is not declared; read tower values in a trace where one invoke carries "
                "the images (the features at the scatter, vision.image_features, are cut per invoke)"
            )
        return None
