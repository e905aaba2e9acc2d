"""The standard envoy classes of the text model: `Layer`, `Attention`, `Mlp`.

A plugin maps its module classes onto these (`vlreg_envoys`), and every family then
answers to the same names.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from nnsight.intervention.util import first_input, replace_first_input

from ..errors import Unavailable
from ..serving.drilled import inside
from ..serving.values import argument, returned, value
from .mixers import Mixer, bind, with_mixers
from .standard import Standard


def eager_only(attention: Standard) -> str | None:
    """Text attention interior: formed only by transformers' eager attention."""
    implementation = attention.root.attn_implementation
    if implementation == "eager":
        return None
    return (
        f"the attention runs as {implementation!r}, which does not expose its interior; "
        "load with attn_implementation='eager'"
    )


#: The attention's interior: what the attention function is called with and computes,
#: formed only by transformers' eager attention.
INTERIOR = ("attention_queries", "attention_keys", "attention_values", "attention_scores", "attention_probabilities",
            "attention_head_outputs")


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
    #: (`vlreg.core.envoys.seq2seq.PostNormLayer`); empty on a pre-norm block.
    post_norms: ClassVar[tuple[str, ...]] = ()
    #: Whether the block's forward returns a tuple, the stream first (Chameleon's), rather
    #: than the stream alone: a skipped block must return the same shape (`passed_through`).
    returns_tuple: ClassVar[bool] = False

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

    def passes(self) -> int:
        """How many passes one forward runs this block: 1, or, on a looped block (a run of
        adjacent blocks the text model calls again and again, pass after pass), the number
        of passes, which a family's block class reads off its config. ``layers`` is then
        the blocks' calls in forward order (`vlreg.core.envoys.blocks`)."""
        return 1

    def passed_through(self, stream: Any) -> Any:
        """What the block returns when it passes ``stream`` through unchanged, in place of
        running (`vlreg.analysis.skip_layers`): the stream, as the block returns it."""
        return (stream,) if self.returns_tuple else stream

    def skipped_output(self) -> Any:
        """What the block hands on when it is skipped (`vlreg.analysis.skip_layers`): the
        stream it takes, as the block returns it (`passed_through`), so the next block
        receives what this one did (every stream, on a block that carries several:
        `vlreg.core.envoys.streams`). Read in a trace, where ``input`` is."""
        return self.passed_through(self.input)

    def identity_reads(self) -> tuple[str, ...]:
        """The values (names relative to the block, in forward order) the block's own
        identity is stated over (`identity`), the last the one it gives; none where the
        block is a plain sum of its sublayers, or its norms (the suite knows those)."""
        return ()

    def identity(self, values: dict[str, Any]) -> Any:
        """The last of `identity_reads` computed from the others (``values``, read in one
        run): how the block's sublayers make its output, where a family's blocks are no
        plain sum (streams that mix, weights a sublayer writes with). The conformance suite
        checks it on every block that states one."""
        raise NotImplementedError

    def why_not_skipped(self, skipped: range) -> str | None:
        """Why this block cannot be skipped together with the blocks ``skipped`` (``None``:
        it can): a family's block class says so where a later block needs what this one
        computes, beside the stream (Gemma 4's shared keys and values)."""
        return None


class ScaledResidualLayer(Layer):
    """A pre-norm block that adds each sublayer's output to the stream times one factor, its
    module's ``residual_multiplier`` (Granite's and HyperCLOVA X's µP width scale):
    ``layer_output == input + m * self_attn.attention_output + m * mlp.mlp_output``. Each
    sublayer's value stays its own output, so its share of the stream is that times
    `residual_multiplier`; the conformance suite checks this identity (`identity`)."""

    @property
    def residual_multiplier(self) -> float:
        """The factor each sublayer's output is added to the stream with."""
        return float(self._module.residual_multiplier)

    def identity_reads(self) -> tuple[str, ...]:
        return ("input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")

    def identity(self, values: dict[str, Any]) -> Any:
        """The input, then each sublayer's output times the factor added, in the block's order."""
        scale = self.residual_multiplier
        attention = values["input"] + values["self_attn.attention_output"] * scale
        return attention + values["mlp.mlp_output"] * scale


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}"


def _inside_call(operation: str) -> Callable[[Any], str]:
    """The location of ``operation`` inside the attention function the block calls.

    The function is only known when the call is made (it depends on the attention
    implementation), so this drills into it in the trace, at the call.
    """

    def locate(attention: Any) -> str:
        return inside(getattr(attention.source, attention.interface), operation)

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
    refuses = dict.fromkeys(INTERIOR, eager_only)

    attention_queries = argument(
        1, lambda a: f"{_call(a)}.input", description="the queries, after the rotary embedding"
    )
    attention_keys = argument(
        2, lambda a: f"{_call(a)}.input", description="the keys, after the rotary embedding"
    )
    attention_values = argument(3, lambda a: f"{_call(a)}.input", description="the values")
    attention_scores = argument(
        0, _inside_call("nn_functional_softmax_0.input"), description="query-key scores before the softmax, mask added",
    )
    attention_probabilities = returned(
        _inside_call("nn_functional_dropout_0.output"), description="the pattern that weights the values",
    )
    attention_head_outputs = returned(
        lambda a: f"{_call(a)}.output", description="each head's output, before o_proj"
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
