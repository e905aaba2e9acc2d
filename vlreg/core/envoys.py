"""The standard envoy classes of the text model: `Layer`, `Attention`, `Mlp`.

A plugin maps its module classes onto these (`vlreg_envoys`), and every family then
answers to the same names. `Standard` is their base: it knows which of its values this
load can serve and which it can write, and lists them in `support` in the order the
forward computes them.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, ClassVar, Iterator

from nnsight.intervention.envoy import Envoy
from nnsight.intervention.util import first_input, replace_first_input

from . import remote
from .errors import Unavailable
from .mixers import Mixer, bind, with_mixers
from .values import argument, returned, value


class Standard(remote.ByReference, Envoy):
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

    _row = ""
    _label = ""
    #: The `Vision` this envoy is part of (None on the text side): its availability
    #: gates every value under it.
    _tower: Any = None
    #: The index of the block (of ``layers`` or ``vision.layers``) this envoy is, or is
    #: part of; ``None`` outside the blocks. What a per-block predicate asks.
    block_index: int | None = None
    #: Whether this envoy's module runs once a generation, before its first step (an
    #: encoder-decoder's encoder, `vlreg.core.seq2seq.Encoder`): every envoy under one is
    #: marked at build (``_once``), and its values are refused at later steps.
    runs_once: ClassVar[bool] = False
    _once: bool = False
    #: Whether this envoy is, or is part of, a block that runs only when an image reaches
    #: the text model (a `CrossAttentionLayer`); set at build.
    _image_block: bool = False

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
            return f"{where}.{name} is absent on this load: its family binds no {name} on {type(self._module).__name__}"
        names = self.standard_names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(found) for found in close)}? " if close else ""
        return (f"{where} has no value or module {name!r}: {hint}its standard names are {', '.join(names)} "
                f"(repr({where}) describes them; native modules keep their own names)")

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
        if self._tower is not None:
            reason = self._tower.no_images()
            if reason:
                return reason
        if self._image_block:
            from .cross import no_images_for_blocks

            reason = no_images_for_blocks(self.root)
            if reason:
                return reason
        return self._ask(name, "unavailable")

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
        trace's input (a tower value on a prompt that carries no image)."""
        reason = self.why_unavailable(name) or self._why_not_in_this_run(getattr(type(self), name))
        if reason is not None:
            raise Unavailable(f"{self.label(name)} is unavailable: {reason}")

    def _why_not_in_this_run(self, served: Any) -> str | None:
        """Why this trace's input (this invoke's rows, when several invokes are batched)
        lacks ``served``: no image where it needs one, or a tower value with images in
        several invokes, whose share of the tower no family declares."""
        from nnsight.intervention.interleaver import Mediator

        mediator = Mediator.current(served.name)
        batcher = getattr(mediator.interleaver, "batcher", None)
        group = mediator.batch_group if batcher is not None and batcher.batching else None
        run = self.root._run
        if self._once and mediator.iteration:
            from .seq2seq import later_step

            return later_step(mediator.iteration)
        steps = getattr(self.root.family.scatter, "steps", None)
        if steps is not None and run.generating and served._location(self) == f"{self.root.path}.input":
            return (
                f"under generate this wrapper's generate never calls its own forward (it runs the image's steps "
                f"itself, then steps model.{steps}), so the model's inputs are never reached; read it in a trace"
            )
        needs = served.needs_images
        if (self._tower is not None or self._image_block) if needs is None else needs:
            reason = self.root.no_images_in_this_run(group)
            if reason and self._image_block:
                from .cross import SKIPPED

                return f"{reason}; {SKIPPED}"
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
        if self.root._replaying and served.layout_on(self) == "tower":
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
        for envoy, name in self._walk():
            if (id(envoy), name) not in done:
                done.add((id(envoy), name))
                yield envoy, name

    def _walk(self) -> Iterator[tuple["Standard", str]]:
        names = self.values()
        placed = {entry for entry in self.order if "." in entry}
        for entry in (*self.order, *names, *self.standard_children):
            head, _, rest = entry.partition(".")
            if entry in names:
                yield self, entry
            elif entry in self.standard_children:
                child = self.__dict__.get(entry)
                for part in [child] if isinstance(child, Standard) else list(child or ()):
                    yield from ((envoy, name) for envoy, name in part._walk()
                                if envoy is not child or f"{entry}.{name}" not in placed)
            elif rest and isinstance(self.__dict__.get(head), Standard):
                yield self.__dict__[head], rest

    def _rows(self, ask: Callable[[Any, str], "str | None"]) -> dict[str, str | None]:
        own = {name: ask(self, name) for name in self.values()}
        children = {
            attribute: {prefix + row: reason for row, reason in _child_rows(self.__dict__.get(attribute), ask).items()}
            for attribute, prefix in self.standard_children.items()
        }
        rows: dict[str, str | None] = {}
        placed = {entry for entry in self.order if "." in entry}
        for entry in (*self.order, *own, *children):
            head, _, rest = entry.partition(".")
            if entry in own:
                rows.setdefault(entry, own[entry])
            elif entry in children:
                rows.update({row: reason for row, reason in children[entry].items() if row not in rows and row not in placed})
            elif rest and head in children and entry in children[head]:
                rows[entry] = children[head][entry]
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


def _child_rows(child: Any, ask: Callable[[Any, str], "str | None"]) -> dict[str, str | None]:
    if child is None:
        return {}
    if isinstance(child, Standard):
        return child._rows(ask)
    blocks = [block._rows(ask) for block in child]
    rows: dict[str, str | None] = {}
    for row in dict.fromkeys(row for block in blocks for row in block):
        having = [i for i, block in enumerate(blocks) if row in block]
        reasons = [blocks[i][row] for i in having]
        if len(having) == len(blocks) and all(reason == reasons[0] for reason in reasons):
            rows[row] = reasons[0]
        elif all(reason == reasons[0] for reason in reasons):
            rows[f"layers.{_spans(having)}.{row}"] = reasons[0]  # only some blocks have it
        else:
            rows.update({f"layers.{i}.{row}": blocks[i][row] for i in having})
    return rows


def _spans(indices: list[int]) -> str:
    """``[0, 1, 2, 4]`` as ``"0-2,4"``: which blocks a row is on."""
    spans: list[list[int]] = []
    for index in indices:
        if spans and spans[-1][1] == index - 1:
            spans[-1][1] = index
        else:
            spans.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def eager_only(attention: Standard) -> str | None:
    """Text attention interior: formed only by transformers' eager attention."""
    implementation = attention.root.attn_implementation
    if implementation == "eager":
        return None
    return (
        f"the attention runs as {implementation!r}, which does not expose its interior; "
        "load with attn_implementation='eager'"
    )


def _size(envoy: Standard, what: str, *sources: tuple[Any, str]) -> int:
    """The first of ``sources`` (object, attribute) that is set, else `Unavailable`."""
    for owner, attribute in sources:
        found = getattr(owner, attribute, None)
        if found is not None:
            return int(found)
    raise Unavailable(
        f"{envoy.label(what)} is unavailable: {type(envoy._module).__name__} keeps no "
        f"{what}; its family's envoy class can say where it is"
    )


class Layer(Standard):
    """A block of the residual stream: ``input`` in, ``output`` out.

    ``layer_output`` is the stream leaving the block (the output itself, or its
    first element where the block returns a tuple). On a pre-norm block,
    ``input + self_attn.attention_output + mlp.mlp_output == layer_output``.
    """

    #: The kinds of token mixer a block of this class may hold, each under its standard
    #: name: ``self_attn``, or ``linear_attn`` (a `LinearAttention`) or ``mamba`` (a
    #: `Mamba`) on a hybrid model's other blocks. A family whose blocks mix tokens another
    #: way declares the kinds on its block class (``mixers = (Mixer("self_attn"),
    #: Mixer("short_conv", native="conv"))``): ``standard_children`` and ``order`` follow,
    #: the mixers where the base class had its own. A block of one sublayer (NemotronH's)
    #: has a mixer or an ``mlp``, not both.
    mixers: ClassVar[tuple[Mixer, ...]] = (Mixer("self_attn"), Mixer("linear_attn"), Mixer("mamba"))
    standard_children = {"self_attn": "self_attn.", "linear_attn": "linear_attn.", "mamba": "mamba.", "mlp": "mlp."}
    order = ("input", "self_attn", "linear_attn", "mamba", "mlp", "output", "layer_output")
    #: The norms a post-norm block applies after each sublayer's residual add, in order
    #: (`vlreg.core.seq2seq.PostNormLayer`); empty on a pre-norm block.
    post_norms: ClassVar[tuple[str, ...]] = ()

    @value("input")
    def input(self, raw: Any) -> Any:
        """The block's first input: the stream entering it."""
        return first_input(*raw)

    input.writes(lambda envoy, raw, new: replace_first_input(*raw, new))

    @value("output")
    def output(self, raw: Any) -> Any:
        """What the block returns, as it returns it."""
        return raw

    layer_output = returned(description="the stream leaving the block")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "mixers" not in vars(cls):
            return
        inherited = [mixer.name for mixer in super(cls, cls).mixers]
        names = [mixer.name for mixer in cls.mixers]
        if "standard_children" not in vars(cls):
            kept = with_mixers(list(cls.standard_children), inherited, names)
            cls.standard_children = {name: cls.standard_children.get(name, f"{name}.") for name in kept}
        if "order" not in vars(cls):
            cls.order = tuple(with_mixers(list(cls.order), inherited, names))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for mixer in type(self).mixers:
            if mixer.native is not None:
                bind(self, mixer)

    def present_mixers(self) -> list[Standard]:
        """The token mixers this block holds, in forward order (one on most blocks)."""
        return [self.__dict__[mixer.name] for mixer in self.mixers if isinstance(self.__dict__.get(mixer.name), Standard)]

    def why_not_skipped(self, skipped: range) -> str | None:
        """Why this block cannot be skipped together with the blocks ``skipped`` (``None``:
        it can): a family's block class says so where a later block needs what this one
        computes, beside the stream (Gemma 4's shared keys and values)."""
        return None


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}"


def _inside_call(operation: str) -> Callable[[Any], str]:
    """The location of ``operation`` inside the attention function the block calls.

    The function is only known when the call is made (it depends on the attention
    implementation), so this drills into it in the trace, at the call.
    """

    def locate(attention: Any) -> str:
        drilled = getattr(attention.source, attention.interface).source
        return f"{drilled.prefix}.{operation}"

    return locate


class Attention(Standard):
    """A block's attention, served through transformers' attention interface.

    ``attention_output`` is what it adds to the stream. The interior is read at the
    call to the attention function: ``attention_queries`` ``[batch, heads, seq,
    head_dim]`` and ``attention_keys``/``attention_values`` ``[batch, kv_heads, seq,
    head_dim]`` as passed (queries and keys after the rotary embedding),
    ``attention_head_outputs`` ``[batch, seq, heads, head_dim]`` as returned, and
    inside the eager function ``attention_scores`` (before the softmax, mask added)
    and ``attention_probabilities`` (the pattern that weights the values).

    Its sizes are the module's own: ``num_heads``, ``num_kv_heads``, ``head_dim``.
    """

    sourced = True
    #: nnsight's name for the call to the attention function in the forward.
    interface: ClassVar[str] = "attention_interface_1"

    attention_queries = argument(
        1, lambda a: f"{_call(a)}.input", unavailable=eager_only, description="the queries, after the rotary embedding"
    )
    attention_keys = argument(
        2, lambda a: f"{_call(a)}.input", unavailable=eager_only, description="the keys, after the rotary embedding"
    )
    attention_values = argument(3, lambda a: f"{_call(a)}.input", unavailable=eager_only, description="the values")
    attention_scores = argument(
        0, _inside_call("nn_functional_softmax_0.input"), unavailable=eager_only,
        description="query-key scores before the softmax, mask added",
    )
    attention_probabilities = returned(
        _inside_call("nn_functional_dropout_0.output"), unavailable=eager_only,
        description="the pattern that weights the values",
    )
    attention_head_outputs = returned(
        lambda a: f"{_call(a)}.output", unavailable=eager_only, description="each head's output, before o_proj"
    )
    attention_output = returned(description="what the attention adds to the stream")

    @property
    def num_heads(self) -> int:
        """Query heads."""
        module = self._module
        return _size(self, "num_heads", (module, "num_heads"), (getattr(module, "config", None), "num_attention_heads"))

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads (fewer than `num_heads` under grouped-query attention)."""
        groups = getattr(self._module, "num_key_value_groups", None)
        return self.num_heads // groups if groups else self.num_heads

    @property
    def head_dim(self) -> int:
        """The width of one head."""
        return _size(self, "head_dim", (self._module, "head_dim"))

    @property
    def qk_head_dim(self) -> int:
        """The width of one head's queries and keys: the module's ``qk_head_dim`` where it
        has one (attention whose queries and keys are wider than its values), else
        `head_dim`."""
        found = getattr(self._module, "qk_head_dim", None)
        return int(found) if found is not None else self.head_dim


class Mlp(Standard):
    """A block's MLP; ``mlp_output`` is what it adds to the stream."""

    mlp_output = returned(description="what the MLP adds to the stream")

    #: The module's first projections, whose width is the hidden width.
    _widening = ("gate_proj", "up_proj", "fc1", "linear_fc1")

    @property
    def intermediate_size(self) -> int:
        """The MLP's hidden width."""
        module = self._module
        found = getattr(module, "intermediate_size", None)
        if found is not None:
            return int(found)
        widening = [(getattr(module, name, None), "out_features") for name in self._widening]
        return _size(self, "intermediate_size", *widening)
