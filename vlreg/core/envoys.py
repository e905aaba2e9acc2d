"""The standard envoy classes of the text model: `Layer`, `Attention`, `Mlp`.

A plugin maps its module classes onto these (`vlreg_envoys`), and every family then
answers to the same names. `Standard` is their base: it knows which of its values this
load can serve and lists them in `support`.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from nnsight.intervention.envoy import Envoy
from nnsight.intervention.util import first_input, replace_first_input

from .errors import Unavailable
from .values import argument, returned, value


class Standard(Envoy):
    """Base of vlreg's envoys: standard values that refuse, with a reason, to be read
    where this load cannot serve them.

    ``_row`` (the prefix of this envoy's rows in the model's `support` table),
    ``_label`` (how a message names it) and ``_tower`` are set when the model is built.
    """

    #: Standard children walked by `support`: attribute -> prefix of their rows.
    standard_children: ClassVar[dict[str, str]] = {}
    #: Whether the module's forward must be source-instrumented at build, because a
    #: value is read at an operation inside it.
    sourced: ClassVar[bool] = False

    _row = ""
    _label = ""
    #: The `Vision` this envoy is part of (None on the text side): its availability
    #: gates every value under it.
    _tower: Any = None

    @classmethod
    def values(cls) -> list[str]:
        """The names of this class's standard values, base classes' first."""
        names: dict[str, None] = {}
        for klass in reversed(cls.__mro__):
            for name, attribute in vars(klass).items():
                if isinstance(attribute, value):
                    names[name] = None
        return list(names)

    def why_unavailable(self, name: str) -> str | None:
        """``None`` if this load can serve ``name`` here, else the reason."""
        if self._tower is not None:
            reason = self._tower.no_images()
            if reason:
                return reason
        own = getattr(type(self), name).unavailable
        family = getattr(self.root, "family", None)
        extra = family.unavailable.get(self._row + name, ()) if family is not None else ()
        for predicate in ((own,) if own else ()) + extra:
            reason = predicate(self)
            if reason:
                return reason
        return None

    def refuse(self, name: str) -> None:
        """Raise `Unavailable` if ``name`` cannot be served here."""
        reason = self.why_unavailable(name)
        if reason is not None:
            where = f"{self._label}.{name}" if self._label else name
            raise Unavailable(f"{where} is unavailable: {reason}")

    def support(self) -> dict[str, str | None]:
        """Every standard value here and below: ``None`` if served, else why not.

        Blocks share rows (``"self_attn.attention_probabilities"``); where blocks
        disagree, each gets its own row (``"layers.3.self_attn.attention_probabilities"``).
        """
        rows = {name: self.why_unavailable(name) for name in self.values()}
        for attribute, prefix in self.standard_children.items():
            for row, reason in _child_rows(self.__dict__.get(attribute)).items():
                rows[prefix + row] = reason
        return rows


def _child_rows(child: Any) -> dict[str, str | None]:
    if child is None:
        return {}
    if isinstance(child, Standard):
        return child.support()
    blocks = [block.support() for block in child]
    rows: dict[str, str | None] = {}
    for row in dict.fromkeys(row for block in blocks for row in block):
        reasons = [block.get(row) for block in blocks]
        if all(reason == reasons[0] for reason in reasons):
            rows[row] = reasons[0]
        else:
            rows.update({f"layers.{i}.{row}": reason for i, reason in enumerate(reasons)})
    return rows


def eager_only(attention: Standard) -> str | None:
    """Text attention interior: formed only by transformers' eager attention."""
    implementation = attention.root.attn_implementation
    if implementation == "eager":
        return None
    return (
        f"the attention runs as {implementation!r}, which does not expose its interior; "
        "load with attn_implementation='eager'"
    )


class Layer(Standard):
    """A block of the residual stream: ``input`` in, ``output`` out.

    ``layer_output`` is the stream leaving the block (the output itself, or its
    first element where the block returns a tuple). On a pre-norm block,
    ``input + self_attn.attention_output + mlp.mlp_output == layer_output``.
    """

    standard_children = {"self_attn": "self_attn.", "mlp": "mlp."}

    @value("input")
    def input(self, raw: Any) -> Any:
        """The block's first input: the stream entering it."""
        return first_input(*raw)

    input.writes(lambda envoy, raw, new: replace_first_input(*raw, new))

    @value("output")
    def output(self, raw: Any) -> Any:
        """What the block returns, as it returns it."""
        return raw

    layer_output = returned()


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
    """

    sourced = True
    #: nnsight's name for the call to the attention function in the forward.
    interface: ClassVar[str] = "attention_interface_1"

    attention_output = returned()
    attention_queries = argument(1, lambda a: f"{_call(a)}.input", unavailable=eager_only)
    attention_keys = argument(2, lambda a: f"{_call(a)}.input", unavailable=eager_only)
    attention_values = argument(3, lambda a: f"{_call(a)}.input", unavailable=eager_only)
    attention_scores = argument(
        0, _inside_call("nn_functional_softmax_0.input"), unavailable=eager_only
    )
    attention_probabilities = returned(
        _inside_call("nn_functional_dropout_0.output"), unavailable=eager_only
    )
    attention_head_outputs = returned(lambda a: f"{_call(a)}.output", unavailable=eager_only)


class Mlp(Standard):
    """A block's MLP; ``mlp_output`` is what it adds to the stream."""

    mlp_output = returned()
