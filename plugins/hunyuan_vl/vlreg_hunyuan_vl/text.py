"""HunYuan-VL's text blocks (``HunYuanVLDenseV1DecoderLayer``): Llama's pre-norm block whose
attention norms queries and keys per head (``query_layernorm``, ``key_layernorm``) under
M-RoPE, a gated MLP; the standard classes as they are (the queries and keys are read where the
attention function takes them)."""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import (At, Attention, GroupRoutedMoe, Layer, LatentAttention, Mlp, MixingStreamsLayer,
                          SparseAttention, adapter, eager_only, inside, modeling_envoys, returned, value)

GATED = adapter("gated_attention")

envoys = modeling_envoys("hunyuan_vl", {"HunYuanVLDenseV1DecoderLayer": Layer, "HunYuanVLDenseV1Attention": Attention,
                                        "HunYuanVLMLP": Mlp})


# -- HY-V4-VL's text model (``hy_v4_vl_text``, transformers 5.25) --------------------------
#
# * **Hyper-connection streams.** The text model repeats the embeddings into ``hc_mult``
#   streams on an axis of their own, ``[batch, seq, streams, hidden]``. Before each sublayer a
#   hyper-connection (``attn_hc``, ``ffn_hc``) returns two things computed from every stream:
#   the weight each stream adds the sublayer's output with (``attention_injection``,
#   ``mlp_injection``, ``[batch, seq, streams]``) and the collapse the sublayer reads
#   (``attention_mix``, ``mlp_mix``); the streams are not mixed with each other::
#
#       streams = injection[..., None] * sublayer_output[..., None, :] + streams
#
#   The readout is ``norm(hc_head(streams))``, ``hc_head`` a learned, input-dependent weighting
#   of the streams: ``input`` and ``layer_output`` are that collapse (`HyV4Layer.collapse`),
#   so the logit lens of any block is the model's own readout there. It has no inverse, so the
#   two are read-only, naming ``layer_streams``.
# * **Attention** (`HyV4Attention`): latent attention whose keys a DSA indexer selects per query
#   (``"shared"`` blocks of ``indexer_types`` reuse the selection of the block before), its heads
#   gated (``sigmoid(gate_proj(x))``) before ``o_proj``, and a learned sink logit per head joined
#   to the scores for the softmax (``attention_sinks``), so ``attention_probabilities`` sum to
#   less than one per query.
# * **Experts**: a dense MLP on ``"dense"`` blocks (``mlp_layer_types``), DeepSeek-V3's routed
#   experts beside a shared one elsewhere (`GroupRoutedMoe`).


def _hc(which: str, element: int, description: str) -> Any:
    return returned(lambda layer: f"{layer.path}.{which}.output", element=element, description=description)


class HyV4Layer(MixingStreamsLayer):
    """An HY-V4 block: streams on their own axis (see above), read out by ``hc_head``; returns
    ``(streams, selection)``, the selection a ``"shared"`` next block reuses."""

    streams_layout = "axis"
    returns_tuple = True
    order = ("input", "input_streams", "attention_injection", "attention_mix", "self_attn", "mlp_injection",
             "mlp_mix", "mlp", "output", "layer_streams", "layer_output")

    attention_injection = _hc("attn_hc", 0, "the weight each stream adds the attention's output with, "
                                            "[batch, seq, streams]")
    attention_mix = _hc("attn_hc", 1, "the collapse of every stream the attention reads (before input_layernorm), "
                                      "[batch, seq, hidden]")
    mlp_injection = _hc("ffn_hc", 0, "the weight each stream adds the MLP's output with, [batch, seq, streams]")
    mlp_mix = _hc("ffn_hc", 1, "the collapse of every stream the MLP reads (before post_attention_layernorm), "
                               "[batch, seq, hidden]")

    @property
    def num_streams(self) -> int:
        """The hyper-connection streams (``hc_mult``)."""
        return int(self._module.attn_hc.hc_mult)

    def collapse(self, streams: torch.Tensor) -> torch.Tensor:
        """The streams as the readout's ``hc_head`` collapses them."""
        return self.parent.parent._module.hc_head(streams)

    def skipped_output(self) -> Any:
        """Every stream it takes, and the selection it was handed, as a ``"shared"`` block
        hands it on."""
        _, kwargs = self.inputs
        return (self.input_streams, kwargs.get("prev_topk_indices"))

    def why_not_skipped(self, skipped: range) -> str | None:
        """A block whose indexer selection the next ``"shared"`` blocks reuse cannot be
        skipped unless they are too."""
        waiting = [i for i in self.self_attn.reused_by() if i not in skipped]
        if not waiting:
            return None
        return f"layers {waiting} reuse its indexer's selection (indexer_types 'shared'); skip them too"

    def identity_reads(self) -> tuple[str, ...]:
        return ("input_streams", "attention_injection", "self_attn.attention_output", "mlp_injection",
                "mlp.mlp_output", "layer_streams")

    def identity(self, values: dict) -> torch.Tensor:
        """Each sublayer's output added to every stream with that stream's weight."""
        streams = values["input_streams"]
        for added, weights in ((values["self_attn.attention_output"], values["attention_injection"]),
                               (values["mlp.mlp_output"], values["mlp_injection"])):
            streams = weights.unsqueeze(-1) * added.unsqueeze(-2) + streams
        return streams


def _joined(index: int, description: str, copy: bool = False) -> value:
    """The ``index``-th of the two tensors the eager function joins before its softmax (the
    scores, then each head's sink logit), written back in its place; with ``copy``, served as a
    copy written back (the sinks are one logit per head expanded over the batch and queries,
    which torch forbids editing in place)."""

    def rebuild(attention: Any, raw: Any, new: Any) -> Any:
        (joined, *rest), kwargs = raw
        joined = list(joined)
        joined[index] = new
        return (joined, *rest), kwargs

    site = At(lambda a: inside(getattr(a.source, a.interface), "torch_cat_0.input"), inside=lambda a: a)
    served = value(site, description=description)(
        lambda attention, raw: raw[0][0][index].clone() if copy else raw[0][0][index]).writes(rebuild)
    return served.transform(lambda attention, view, raw: rebuild(attention, raw, view)) if copy else served


class HyV4Attention(SparseAttention, LatentAttention, GATED):
    """HY-V4's attention: latent, gated per head and channel, its keys cut by a DSA indexer
    (the indexer's scores ``[batch, queries, keys]``), a sink logit per head."""

    order = ("query_latents", "kv_latents", "indexer_scores", "selected_keys", "attention_queries", "attention_keys",
             "attention_values", "sparse_attention_mask", "attention_scores", "attention_sinks",
             "attention_probabilities", "attention_head_outputs", "attention_output")
    refuses = {**LatentAttention.refuses, **SparseAttention.refuses, **GATED.refuses, "attention_sinks": eager_only}
    # a reusing block's selection is read where the forward assigns it, after the latents
    shared_at, shared_selection = "topk_indices_1", None
    attention_scores = _joined(0, "query-key scores before the softmax, mask added")
    attention_sinks = _joined(1, "each head's sink logit, joined to the scores for the softmax, [batch, heads, seq, 1]",
                              copy=True)

    # the indexer's masked scores: transformers runs the model eager only (an additive mask)
    scores_operation = "index_scores_2"


hy_v4_envoys = modeling_envoys("hy_v4_vl", {
    "HYV4VLDecoderLayer": HyV4Layer, "HYV4VLAttention": HyV4Attention, "HYV4VLMLP": Mlp, "HYV4VLMoE": GroupRoutedMoe})
