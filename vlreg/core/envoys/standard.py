"""`Standard`, the base of every standard envoy: which of its values this load can serve
and which it can write, and the one walk over the standard tree in forward order that
`support`, `read_only`, `walk` and the forward order in words all come from.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, ClassVar, Iterator

import torch
from attrs import frozen
from nnsight.intervention.envoy import Envoy

from ..errors import Unavailable
from ..serving.reference import ByReference
from ..serving.values import value


@frozen
class Visit:
    """One step of the walk over the standard tree (`tree`): an envoy entered (``name``
    ``None``) or one of its values. ``row`` is the envoy's prefix in `support`'s rows,
    ``label`` how a message names it (``layers[1].self_attn``); on a block or inside one,
    ``block`` is the block's index among its siblings and ``stack`` the row of those
    siblings' blocks, so rows several blocks share can be told apart."""

    envoy: Any
    row: str
    label: str
    name: str | None = None
    block: int | None = None
    stack: str | None = None


def tree(envoy: "Standard", row: str = "", label: str = "", block: int | None = None,
         stack: str | None = None) -> Iterator[Visit]:
    """Every standard envoy under ``envoy`` (itself first) and every value of each, in the
    order the forward computes them: the one walk `support`, `read_only`, `walk` and the
    forward order in words come from.

    An envoy's ``order`` lists its values and children in forward order; an entry
    ``"child.value"`` places that value of a child there (the root's
    ``"vision.image_token_mask"``, read before the tower runs), and the child's own walk
    then leaves it out."""
    yield Visit(envoy, row, label, None, block, stack)
    names = envoy.values()
    children = envoy.standard_children
    placed = {entry for entry in envoy.order if "." in entry}
    for entry in dict.fromkeys((*envoy.order, *names, *children)):
        head, _, rest = entry.partition(".")
        if entry in names:
            yield Visit(envoy, row, label, entry, block, stack)
        elif entry in children:
            for child, where, index in _children(envoy, entry, label):
                inner = stack if index is None else row + children[entry]
                for visit in tree(child, row + children[entry], where, block if index is None else index, inner):
                    if not (visit.envoy is child and visit.name is not None and f"{entry}.{visit.name}" in placed):
                        yield visit
        elif rest and head in children and isinstance(child := envoy.__dict__.get(head), Standard):
            yield Visit(child, row + children[head], _joined(label, head), rest, block, stack)


def _joined(label: str, name: str) -> str:
    return f"{label}.{name}" if label else name


def _children(envoy: "Standard", attribute: str, label: str) -> Iterator[tuple["Standard", str, int | None]]:
    """The standard child ``attribute`` of ``envoy`` (one, or each block of a list), with
    its label and its index among the blocks (``None`` for a single child)."""
    child = envoy.__dict__.get(attribute)
    where = _joined(label, attribute)
    if child is None:
        return
    if isinstance(child, Standard):
        yield child, where, None
        return
    if not isinstance(getattr(child, "_module", None), torch.nn.ModuleList):
        raise TypeError(_unmapped(envoy, where, child))
    for index, entry in enumerate(child):
        if not isinstance(entry, Standard):
            raise TypeError(_unmapped(envoy, f"{where}[{index}]", entry))
        yield entry, f"{where}[{index}]", index


def _unmapped(envoy: "Standard", where: str, child: Envoy) -> str:
    family = envoy.root.family
    return (
        f"{where} is a {type(child._module).__name__} that no plugin of the "
        f"{family.name!r} family maps to a standard envoy class: add it to the "
        f"plugin's vlreg_envoys."
    )


class Standard(ByReference, Envoy):
    """Base of vlreg's envoys: standard values that refuse, with a reason, to be read
    where this load cannot serve them, or written where a write would not land.

    ``_row`` (the prefix of this envoy's rows in the model's `support` table),
    ``_label`` (how a message names it), ``_tower`` and `block_index` are set when the
    model is built.
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

    _row = ""
    _label = ""
    #: The `Vision` this envoy is part of (None on the text side): its availability
    #: gates every value under it.
    _tower: Any = None
    #: The index of the block (of ``layers`` or ``vision.layers``) this envoy is, or is
    #: part of; ``None`` outside the blocks. What a per-block predicate asks.
    block_index: int | None = None
    #: Whether this envoy's module runs once a generation, before its first step (an
    #: encoder-decoder's encoder, `Encoder`): every envoy under one holds it in ``_once``
    #: (set at build), and its values are refused at later steps with its `later_step`.
    runs_once: ClassVar[bool] = False
    _once: Any = None
    #: The block that runs only when an image reaches the text model (a
    #: `CrossAttentionLayer`) this envoy is or is part of, set at build: its `no_images`
    #: and ``skipped`` say why the values are absent.
    _image_block: Any = None

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
        where = f"model.{self._label}" if self._label else "model"
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
        return family.refuses.get(self._row + name) if family is not None else None

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
        return f"{self._label}.{name}" if self._label else name

    def why_unavailable(self, name: str) -> str | None:
        """``None`` if this load can serve ``name`` here, else the reason."""
        for gate in (self._tower, self._image_block):
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
        extra = family.predicates(table, self._row + name) if family is not None else ()
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
        if self._once is not None and mediator.iteration:
            return self._once.later_step(mediator.iteration)
        steps = getattr(self.root.family.entry, "steps", None)
        if steps is not None and run.generating and served._location(self) == f"{self.root.path}.input":
            return (
                f"under generate this wrapper's generate never calls its own forward (it runs the image's steps "
                f"itself, then steps model.{steps}), so the model's inputs are never reached; read it in a trace"
            )
        needs = served.needs_images
        if (self._tower is not None or self._image_block is not None) if needs is None else needs:
            reason = self.root.no_images_in_this_run(group)
            if reason and self._image_block is not None:
                return f"{reason}; {self._image_block.skipped}"
            if reason:
                return reason
            step = mediator.iteration
            if (self._tower is not None or needs) and step and run.inputs.get("use_cache", True) is not False:
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

    def support(self) -> dict[str, str | None]:
        """Every standard value here and below, in forward order: ``None`` if served,
        else why not.

        Blocks share rows (``"self_attn.attention_probabilities"``); where blocks
        disagree, each gets its own row (``"layers.3.self_attn.attention_probabilities"``).
        What the family's claims refuse that is no value (`vlreg.plugin.Claim`'s
        ``refuses``: a trace input such as ``"videos"``, a path without standard names) is a
        row too, with its reason: beside the rows of the part it names, or before the
        readout.
        """
        return _with_refusals(self, self._rows(lambda envoy, name: envoy.why_unavailable(name)))

    def read_only(self) -> dict[str, str]:
        """The values here and below that can be read but not written, with why and what
        to edit instead (the rows of `support` that refuse writes)."""
        served = self.support()
        rows = self._rows(lambda envoy, name: envoy.why_read_only(name))
        return {row: reason for row, reason in rows.items() if reason is not None and served.get(row) is None}

    def walk(self) -> Iterator[tuple["Standard", str]]:
        """Every ``(envoy, value name)`` here and below, every block's, in the order the
        forward computes them: reading them in this order in one trace is in order.
        Includes values this load cannot serve (`why_unavailable` says which)."""
        done: set[tuple[int, str]] = set()
        for visit in tree(self):
            if visit.name is not None and (id(visit.envoy), visit.name) not in done:
                done.add((id(visit.envoy), visit.name))
                yield visit.envoy, visit.name

    def _rows(self, ask: Callable[[Any, str], "str | None"]) -> dict[str, str | None]:
        """`ask`'s answer for every value here and below, a row each, in forward order.
        A row blocks share is one row where every block of the stack has it and answers
        alike; else ``layers.<blocks>.<row>``, one per answer. A tower's values are left
        out where no image reaches it."""
        merged: dict[tuple, dict[int | None, str | None]] = {}
        sizes: dict[str, int] = {}
        for visit in tree(self):
            tower = visit.envoy._tower
            if visit.name is None or (tower is not None and tower.no_images()):
                continue
            if visit.block is None:
                merged.setdefault((None, visit.row + visit.name), {None: ask(visit.envoy, visit.name)})
                continue
            within = visit.row[len(visit.stack):] + visit.name
            merged.setdefault((visit.stack, within), {})[visit.block] = ask(visit.envoy, visit.name)
            sizes[visit.stack] = max(sizes.get(visit.stack, 0), visit.block + 1)
        rows: dict[str, str | None] = {}
        for (stack, row), answers in merged.items():
            if stack is None:
                rows.setdefault(row, answers[None])
                continue
            reasons = list(answers.values())
            if len(answers) == sizes[stack] and all(reason == reasons[0] for reason in reasons):
                rows.setdefault(stack + row, reasons[0])
            elif all(reason == reasons[0] for reason in reasons):
                rows[f"{stack}layers.{_spans(sorted(answers))}.{row}"] = reasons[0]  # only some blocks have it
            else:
                rows.update({f"{stack}layers.{i}.{row}": reason for i, reason in answers.items()})
        return rows


def _with_refusals(envoy: Standard, rows: dict[str, str | None]) -> dict[str, str | None]:
    """``rows`` (of the root, or of a part such as the tower) with the refused names that
    are not among them placed: after the last row of the part a name is under (only where
    that part has rows: a text-only load shows no tower), else before the readout."""
    family = getattr(envoy.root, "family", None)
    if family is None or not family.refuses:
        return rows
    if envoy is envoy.root:
        names = dict(family.refuses)
    elif envoy._row and envoy.block_index is None and rows:
        names = {name.removeprefix(envoy._row): reason for name, reason in family.refuses.items()
                 if name.startswith(envoy._row)}
    else:
        return rows
    items = list(rows.items())
    for name, reason in names.items():
        if name in rows:
            continue
        head = name.partition(".")[0] + "."
        under = [i for i, (row, _) in enumerate(items) if row.startswith(head)]
        if "." in name and not under:
            continue
        readout = [i for i, (row, _) in enumerate(items) if row in ("uncapped_logits", "logits")]
        at = under[-1] + 1 if under else (readout[0] if readout else len(items))
        items.insert(at, (name, reason))
    return dict(items)


def _spans(indices: list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``"0-2,4"``: which blocks a row is on."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and spans[-1][1] == index - 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
