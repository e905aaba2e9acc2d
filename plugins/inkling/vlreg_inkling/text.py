"""Inkling 2's text blocks (``Inkling2SlidingDecoderLayer``, ``Inkling2FullDecoderLayer``):
block attention residuals, a short convolution after each sublayer, routed experts.

The text model carries, beside the stream, ``block_states``: the stream as it entered each
block that opened a group of ``n_layers_per_attn_res_block`` blocks (a *boundary* block),
``[batch, seq, n, hidden]``. Each sublayer reads no plain stream but an attention of a
learned query over those stored states and the current stream (``attention_input``,
``mlp_input``: `Inkling2Layer.attention_mix`, ``mlp_mix``; the full-attention blocks read
three, one each for queries, keys and values). What the block passes on, ``layer_output``,
is the stream of the current group: its input plus what each sublayer adds, except on a
boundary block, where the group restarts at the attention's output (the input is stored in
``block_states`` instead): the identity `Inkling2Layer.identity` states and the suite checks.

What a sublayer adds is read after its short convolution (``post_attention_convolution``,
``post_mlp_convolution``, each ``(conv(x) + x) / sqrt(k + 1)``), the way Gemma's sandwich
reads after its post-norms: ``attention_output`` and ``mlp_output``; the sublayers' own outputs
stay where they are (``self_attn.output``, ``mlp.routed_output``).
"""

from __future__ import annotations

from typing import Any

from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import (At, Attention, Layer, Mlp, MoeMlp, SharedExpertsAfter, argument, copied, eager_only, inside,
                          modeling_envoys, read_only, returned, value)


def _after(convolution: str):
    """The output of the block's ``convolution``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{convolution}.output"


def _projection(attention: Any) -> Any:
    """The linear map the gated heads enter: ``o_proj`` (transformers 5.23), or the ``linear``
    inside ``o_proj``, which gates them itself (5.25's ``Inkling2GatedOutputProjection``)."""
    projection = attention.o_proj
    return projection.linear if hasattr(projection._module, "linear") else projection


def _heads(attention: Any, flat: Any) -> Any:
    """``[batch, seq, heads * head_dim]`` as ``[batch, seq, heads, head_dim]`` (a view)."""
    return flat.view(*flat.shape[:-1], -1, attention.head_dim)


def _inside(operation: str):
    """The location of ``operation`` inside the attention function the block calls."""
    return lambda attention: inside(getattr(attention.source, attention.interface), operation)


def _joined(index: int, description: str) -> value:
    """The ``index``-th of the two tensors the eager function joins before its softmax (the
    scores, then each query's sink logit), written back in its place."""

    def rebuild(attention: Any, raw: Any, new: Any) -> Any:
        (joined, *rest), kwargs = raw
        joined = list(joined)
        joined[index] = new
        return (joined, *rest), kwargs

    served = value(At(_inside("torch_cat_0.input"), inside=lambda a: a), description=description)(
        lambda attention, raw: raw[0][0][index])
    return served.writes(rebuild)


class ConvolvedAttention(Attention):
    """Inkling 2's attention (output gate, sinks, relative logits, L2 clips): what it adds
    to the stream is the post-attention convolution's output. Its heads are gated
    (``sigmoid(gate_proj(x))``) before their linear map (`_projection`), so ``attention_head_outputs`` is read where
    that map receives them, after the gate, as on Qwen3.5's gated attention (the adapter
    ``"gated_attention"``); the ungated outputs are the attention function's. Its eager function joins each
    query's sink logit (``sink_proj``'s) to the scores before the softmax and drops it after,
    so ``attention_probabilities`` sum to less than one per query: the sink took the rest."""

    order = ("attention_queries", "attention_keys", "attention_values", "attention_scores", "attention_sinks",
             "attention_probabilities", "attention_head_outputs", "attention_output")
    refuses = {**Attention.refuses, "attention_sinks": eager_only}
    attention_head_outputs = value(
        lambda attention: f"{_projection(attention).path}.input",
        description="each head's output as o_proj receives it, after the output gate (gate_proj's sigmoid)",
    )(lambda attention, raw: _heads(attention, first_input(*raw))).writes(
        lambda attention, raw, new: replace_first_input(*raw, new.reshape(first_input(*raw).shape)))
    attention_scores = _joined(0, "query-key scores before the softmax, relative logits and mask added")
    attention_sinks = _joined(1, "each query's sink logit, joined to the scores for the softmax, "
                                 "[batch, heads, seq, 1]")
    attention_output = returned(_after("post_attention_convolution"),
                                description="what the attention adds to the stream, after the block's short convolution")


class ConvolvedExperts(MoeMlp):
    """Inkling 2's routed experts (a sigmoid router with a score correction bias, softcapped
    SwiGLU experts, no shared expert): what they add is the post-MLP convolution's output."""

    shared_expert_module = None
    mlp_output = returned(_after("post_mlp_convolution"),
                          description="what the MLP adds to the stream, after the block's short convolution")


def _first_block(layer: Any) -> str | None:
    if layer._module.attention_input is not None:
        return None
    return "the first block is handed no stored group (an empty tensor), which nothing reads"


def _no_mix(layer: Any) -> str | None:
    if layer._module.attention_input is not None:
        return None
    return "the first block's attention reads its input as it is (no stored block to attend over yet)"


class Inkling2Layer(Layer):
    """An Inkling 2 block: see the module. ``block_states`` are the stored states it reads;
    ``attention_mix`` and ``mlp_mix`` what its sublayers read (before their norms)."""

    order = ("input", "block_states", "attention_mix", "self_attn", "mlp_mix", "mlp", "output", "layer_output")
    refuses = {"attention_mix": _no_mix, "block_states": read_only(_first_block)}

    block_states = argument(1, lambda layer: f"{layer.path}.input", description="the stream as it entered each earlier group of blocks, "
                                                    "[batch, seq, groups, hidden]")
    attention_mix = copied(lambda layer: f"{layer.path}.attention_input.output",
                             description="the attention over the stored states and the stream the attention reads "
                                         "(its queries' on full-attention blocks), [batch, seq, hidden]")
    mlp_mix = copied(lambda layer: f"{layer.path}.mlp_input.output",
                       description="the attention over the stored states and the stream the MLP reads, "
                                   "[batch, seq, hidden]")

    @property
    def opens_group(self) -> bool:
        """Whether the block opens a group (``is_block_boundary``): its input is stored and
        its own stream restarts at its attention's output."""
        return bool(self._module.is_block_boundary)

    def identity_reads(self) -> tuple[str, ...]:
        return ("input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")

    def identity(self, values: dict) -> Any:
        """The input (none where the block opens a group) plus what each sublayer adds."""
        start = 0 if self.opens_group else values["input"].float()
        added = values["self_attn.attention_output"].float() + values["mlp.mlp_output"].float()
        return (start + added).to(values["layer_output"].dtype)


envoys = modeling_envoys("inkling2", {
    "Inkling2SlidingDecoderLayer": Inkling2Layer, "Inkling2FullDecoderLayer": Inkling2Layer,
    "Inkling2SlidingAttention": ConvolvedAttention, "Inkling2FullAttention": ConvolvedAttention,
    "Inkling2SparseMoeBlock": ConvolvedExperts,
})


class Inkling2LoopLayer(Inkling2Layer):
    """A looped block of Inkling 2 Loop (``Inkling2Loop*LoopDecoderLayer``): the text model
    runs the blocks from ``loop_layer_index_start`` to ``loop_layer_index_end`` as a group,
    ``loop_num_passes`` times, each pass from the stream and stored groups the blocks before
    the loop left, its sublayers' inputs after the first pass gated with messages (what
    ``message_input`` reads from the previous pass: ``*_message_gate``, native). ``layers``
    is the blocks' calls in forward order: one entry per pass of each looped block."""

    def passes(self) -> int:
        return self._module.self_attn.config.loop_num_passes


#: Inkling 2 Loop (transformers 5.25): Inkling 2's blocks, its looped ones run once a pass.
loop_envoys = modeling_envoys("inkling2_loop", {
    "Inkling2LoopSlidingDecoderLayer": Inkling2Layer, "Inkling2LoopFullDecoderLayer": Inkling2Layer,
    "Inkling2LoopSlidingLoopDecoderLayer": Inkling2LoopLayer, "Inkling2LoopFullLoopDecoderLayer": Inkling2LoopLayer,
    "Inkling2LoopSlidingAttention": ConvolvedAttention, "Inkling2LoopFullAttention": ConvolvedAttention,
    "Inkling2LoopSparseMoeBlock": ConvolvedExperts,
})


class Inkling1Attention(Attention):
    """Inkling 1's attention (per-head query and key norms, relative logits, short
    convolutions on keys and values): what it adds is the ``attn_sconv`` output."""

    attention_output = returned(_after("attn_sconv"),
                                description="what the attention adds to the stream, after the block's short convolution")


class Inkling1Mlp(Mlp):
    """Inkling 1's dense MLP (SwiGLU times a learned ``global_scale``): what it adds is the
    ``mlp_sconv`` output."""

    mlp_output = returned(_after("mlp_sconv"),
                          description="what the MLP adds to the stream, after the block's short convolution")


class Inkling1Experts(SharedExpertsAfter):
    """Inkling 1's routed experts and two shared ones, run after them on every token and
    weighted by the router (its fourth output): what they add is the ``mlp_sconv`` output. The
    router scores the shared experts beside the routed ones; ``router_logits`` holds every
    score, the routed experts' first."""

    mlp_output = returned(_after("mlp_sconv"),
                          description="what the MLP adds to the stream, after the block's short convolution")


inkling1_envoys = modeling_envoys("inkling", {
    "InklingDecoderLayer": Layer, "InklingAttention": Inkling1Attention, "InklingMLP": Inkling1Mlp,
    "InklingMoE": Inkling1Experts,
})
