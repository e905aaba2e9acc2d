"""The Qwen3 line's text blocks: DeepStack's additions after the first blocks, and
Qwen3.5's gated attention.

Qwen3-VL's text model adds each DeepStack tap to the stream at the image tokens right
after text block ``k`` returns, from one call site in its loop over the blocks
(``self._deepstack_process(hidden_states, visual_pos_masks, deepstack_visual_embeds[k])``),
so tap ``k`` is call ``k`` of that operation. `DeepStackLayer.deepstack_output` reads it
there: ``[image_tokens, hidden_size]``, what is added; ``layer_output`` stays the block's
own output, so ``layers[k + 1].input[mask] == layers[k].layer_output[mask] +
layers[k].deepstack_output`` and the block identity both hold.

Qwen4-Exp's blocks (`Qwen4ExpLayer`) are Qwen3.5-MoE's under hyper-connections: the text
model repeats the embeddings into ``hc_count`` streams packed along the hidden axis,
``[batch, seq, hc_count * hidden]``; before each sublayer a gated residual
(``attn_hyper_connection``, ``mlp_hyper_connection``) norms every stream and hands the
sublayer a learned per-token mix of them (``attention_mix``, ``mlp_mix``), then adds the
sublayer's output to every stream, each with its own weight (``attention_injection``,
``mlp_injection``, ``[batch, seq, hc_count]``). The readout is one more such mix
(``hyper_connection_mixer``), read out by ``lm_head`` with no final norm; ``input`` and
``layer_output`` are the streams as that mix collapses them, so the logit lens of any
block is the model's own readout there. The mix has no inverse: a write goes to
``input_streams`` or ``layer_streams``. The n-gram embeddings (PLE) some linear blocks add
to every stream before their sublayers are ``per_layer_ids`` (the hashed n-gram ids the
table is read at), ``per_layer_embeddings`` (what was looked up) and ``per_layer_output``
(what is added); the indexed attention's sparse selection is
``self_attn.selected_token_mask`` (`IndexedAttention`).

`TEXTS` names each text model's classes by its own ``model_type`` (``qwen3_5_text`` is
Qwen3.5's, whichever wrapper hosts it), and `text_envoys` maps them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import torch
import torch.nn.functional as F
from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import (IMAGES, At, Attention, Layer, LinearAttention, Mlp, MixingStreamsLayer, MoeMlp, argument,
                          eager_only, returned, value)

#: text model type -> (its transformers module, the class-name prefix of its text classes)
TEXTS = {
    "qwen3_vl_text": ("qwen3_vl", "Qwen3VLText"),
    "qwen3_vl_moe_text": ("qwen3_vl_moe", "Qwen3VLMoeText"),
    "qwen3_5_text": ("qwen3_5", "Qwen3_5"),
    "qwen3_5_moe_text": ("qwen3_5_moe", "Qwen3_5Moe"),
    # Qwen3-VL's text model with Cohere2's blocks: parallel (the attention and the MLP both read
    # input_layernorm's output, the block returns their plain sum), DeepStack after the first
    "cohere_compass_text": ("cohere_compass", "CohereCompass"),
    # Qwen3.5-MoE's blocks under hyper-connection streams, n-gram embeddings and a sparse indexer
    "qwen4_exp_text": ("qwen4_exp", "Qwen4ExpText"),
}


def _text_model(layer: Any) -> Any:
    return layer.parent.parent


def _no_tap(layer: Any) -> str | None:
    taps = len(getattr(layer.root._module.config.vision_config, "deepstack_visual_indexes", None) or ())
    if layer.block_index < taps:
        return None
    return (
        f"the tower's {taps} DeepStack taps feed layers[0] to layers[{taps - 1}] only "
        f"(vision_config.deepstack_visual_indexes)"
    )


class DeepStackLayer(Layer):
    """A Qwen3-VL text block, and what DeepStack adds after it."""

    order = (*Layer.order, "deepstack_output")
    refuses = {"deepstack_output": (_no_tap, IMAGES)}

    deepstack_output = argument(
        2,
        At(lambda layer: f"{_text_model(layer).path}.source.self__deepstack_process_0.input",
           inside=_text_model, occurrence=lambda layer: layer.block_index),
        layout="image_tokens",
        description="what DeepStack adds to the stream at the image tokens after this block, [image_tokens, hidden]",
    )


def _heads(attention: Any, flat: Any) -> Any:
    """``[batch, seq, heads * head_dim]`` as ``[batch, seq, heads, head_dim]`` (a view)."""
    return flat.view(*flat.shape[:-1], -1, attention.head_dim)


class GatedAttention(Attention):
    """Qwen3.5's full attention: its heads are gated per channel (``sigmoid`` of a second
    half of ``q_proj``) before ``o_proj``, so `attention_head_outputs` is read where
    ``o_proj`` receives them, after the gate: ``o_proj(attention_head_outputs) ==
    attention_output`` holds as on any block. The ungated outputs are the attention
    function's (``self_attn.source.attention_interface_1.output``)."""

    refuses = {"attention_head_outputs": eager_only}
    attention_head_outputs = value(
        lambda attention: f"{attention.o_proj.path}.input",
        description="each head's output as o_proj receives it, after the output gate",
    )(lambda attention, raw: _heads(attention, first_input(*raw))).writes(
        lambda attention, raw, new: replace_first_input(*raw, new.reshape(first_input(*raw).shape))
    )


class IndexedAttention(GatedAttention):
    """Qwen4-Exp's indexed attention: Qwen3.5's gated attention whose keys are cut, per
    query, to the blocks of keys its indexer (``indexer``, QSA) selects. The selection is
    served where the attention receives it, before it joins the causal mask, so a write
    to it decides what the attention reads. The indexer's block scores are computed one
    query at a time inside its loop and kept by no tensor: refused by name."""

    order = ("selected_token_mask", *GatedAttention.order)
    refuses = {"indexer_scores": "Qwen4-Exp's indexer scores each query's key blocks inside a loop over the queries "
                                 "and keeps no tensor of them; read self_attn.selected_token_mask, what they select"}

    selected_token_mask = returned(
        lambda attention: f"{attention.path}.indexer.output",
        description="the keys each query may read, as the indexer selected them, [batch, 1, queries, keys] (True: "
                    "read); joined to the causal mask before the attention",
    )
    indexer_scores = value("output", description="the indexer's scores of each query's key blocks")(
        lambda attention, raw: None)


def _mix(mixer: Any, streams: torch.Tensor) -> torch.Tensor:
    """A Qwen4-Exp gated residual's mix of every stream (``[batch, seq, k * hidden]`` to
    ``[batch, seq, hidden]``), from its weights: its grouped RMS norm of each stream, a
    low-rank sigmoid gate, the gated streams' mean. The module's own arithmetic, without
    calling the module (a call inside a trace would be one nnsight serves)."""
    k, width, norm = mixer.hc_count, mixer.hidden_size, mixer.hc_norm
    x = streams.float().unflatten(-1, (k, width))
    normed = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)).flatten(-2)
    normed = (normed * (1.0 + norm.weight.float())).type_as(streams)
    gate = F.silu(F.linear(normed, mixer.input_mix_weight_down.weight) / k)
    gate = torch.sigmoid(F.linear(gate, mixer.input_mix_weight_up.weight)).unflatten(-1, (k, width))
    return (gate * normed.unflatten(-1, (k, width))).mean(dim=-2)


def _no_per_layer(layer: Any) -> str | None:
    if layer._module.ple is not None:
        return None
    blocks = [i - 1 for i in layer.root._module.config.get_text_config().ple_layer_ids]
    if not blocks:
        return "this model adds no n-gram embeddings (text_config.ple_layer_ids is empty)"
    return f"only layers {blocks} add n-gram embeddings (text_config.ple_layer_ids, one-indexed)"


def _ple(layer: Any) -> str:
    return f"{layer.path}.ple"


class Qwen4ExpLayer(MixingStreamsLayer):
    """A Qwen4-Exp block: hyper-connection streams packed along the hidden axis (see the
    module), read out through ``hyper_connection_mixer``."""

    streams_layout = "packed"
    order = ("input", "input_streams", "per_layer_ids", "per_layer_embeddings", "per_layer_output", "attention_mix",
             "attention_injection", "self_attn", "linear_attn", "mlp_mix", "mlp_injection", "mlp", "output",
             "layer_streams", "layer_output")
    refuses = {**MixingStreamsLayer.refuses, "per_layer_ids": _no_per_layer, "per_layer_embeddings": _no_per_layer,
               "per_layer_output": _no_per_layer}

    @property
    def num_streams(self) -> int:
        """The hyper-connection streams (``hc_count``)."""
        return self._module.attn_hyper_connection.hc_count

    def collapse(self, streams: torch.Tensor) -> torch.Tensor:
        """The streams as the readout's mixer (``hyper_connection_mixer``) collapses them."""
        return _mix(self.parent.parent._module.hyper_connection_mixer, streams)

    per_layer_ids = argument(
        0, lambda layer: f"{_ple(layer)}.ple_embedding.ngram_embedding.input",
        description="the hashed n-gram ids the block's n-gram table is read at, [batch, seq, ngram_heads]",
    )
    per_layer_embeddings = returned(
        lambda layer: f"{_ple(layer)}.ple_embedding.output",
        description="the n-gram embeddings looked up, every head's concatenated, [batch, seq, ple_embed_dim]",
    )
    per_layer_output = returned(
        lambda layer: f"{_ple(layer)}.output",
        description="what the n-gram embeddings add to every stream before the sublayers, [batch, seq, k * hidden]",
    )
    attention_mix = returned(
        lambda layer: f"{layer.path}.attn_hyper_connection.output", element=0,
        description="the mix of every stream the mixer reads, [batch, seq, hidden]",
    )
    attention_injection = returned(
        lambda layer: f"{layer.path}.attn_hyper_connection.output", element=2,
        description="the weight each stream adds the mixer's output with, [batch, seq, streams]",
    )
    mlp_mix = returned(
        lambda layer: f"{layer.path}.mlp_hyper_connection.output", element=0,
        description="the mix of every stream the MLP reads, [batch, seq, hidden]",
    )
    mlp_injection = returned(
        lambda layer: f"{layer.path}.mlp_hyper_connection.output", element=2,
        description="the weight each stream adds the MLP's output with, [batch, seq, streams]",
    )

    def identity_reads(self) -> tuple[str, ...]:
        mixer = "self_attn" if "self_attn" in self.__dict__ else "linear_attn"
        added = ("per_layer_output",) if self._module.ple is not None else ()
        return ("input_streams", *added, "attention_injection", f"{mixer}.attention_output", "mlp_injection",
                "mlp.mlp_output", "layer_streams")

    def identity(self, values: dict) -> torch.Tensor:
        """Every stream plus the n-gram embeddings, then each sublayer's output added to every
        stream with that stream's weight."""
        attention = next(read for name, read in values.items() if name.endswith(".attention_output"))
        streams = values["input_streams"] + values.get("per_layer_output", 0)
        for added, weights in ((attention, values["attention_injection"]),
                               (values["mlp.mlp_output"], values["mlp_injection"])):
            streams = streams + (added.unsqueeze(-2) * weights.unsqueeze(-1)).flatten(-2)
        return streams


def text_envoys(part: Any) -> dict:
    """The text model's classes onto their envoys, by the part's own model type. Qwen3.5's
    blocks mix tokens by gated full attention or by a gated delta net; the MoE variants
    route their MLPs (a dense `Mlp` stays on ``mlp_only_layers`` and the shared expert)."""
    module, prefix = TEXTS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    hybrid = hasattr(modeling, f"{prefix}GatedDeltaNet")  # Qwen3.5: linear and full blocks
    streams = part.model_type == "qwen4_exp_text"
    found = {
        getattr(modeling, f"{prefix}DecoderLayer"): Qwen4ExpLayer if streams else Layer if hybrid else DeepStackLayer,
        getattr(modeling, f"{prefix}Attention"): IndexedAttention if streams else GatedAttention if hybrid else Attention,
    }
    if hybrid:
        found[getattr(modeling, f"{prefix}GatedDeltaNet")] = LinearAttention
    found[getattr(modeling, f"{prefix}MLP")] = Mlp  # dense blocks (mlp_only_layers), or the shared expert
    sparse = getattr(modeling, f"{prefix}SparseMoeBlock", None)
    if sparse is not None:
        found[sparse] = MoeMlp
    return found
