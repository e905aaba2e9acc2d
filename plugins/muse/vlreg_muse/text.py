"""Muse's text blocks: Glimmer's (``muse_glimmer_text``, ``MuseGlimmerTextDecoderLayer``) and
Spark's (``muse_spark_text``, ``MuseSparkTextDecoderLayer``).

Gemma 2's sandwich: each sublayer reads a norm of the stream and its output is normed again
before it is added (``post_attention_layernorm``, ``post_feedforward_layernorm``), so what the
attention and the MLP add to the stream is read at those norms (the adapter ``"sandwich"``,
vlreg-gemma) and ``input + attention_output + mlp_output == layer_output``. The attention
norms its queries and keys per head (no weights; the queries then scaled by
``qk_scale_factor``), rotates them on all but the NoPE blocks (``layer_rope_theta`` 0), and
gates its heads' outputs per channel (``sigmoid(gate_proj(x))``) before ``o_proj``: its head
outputs are read where ``o_proj`` receives them, after the gate (the adapter
``"gated_attention"``, vlreg-qwen3-vl), the ungated ones at the attention function's call.

The embedding (``MuseGlimmerTextNormedEmbedding``) norms what it looks up, so
``token_embeddings`` are normed rows; the wrapper embeds the prompt with the image
placeholders replaced by token 0, then writes the image in over them.

Muse Spark's blocks are Glimmer's (the attention now norms its head outputs, weight-less,
``o_norm``, before the gate), their residual adds gated: after each
sublayer the block keeps ``alpha * residual + beta * out`` (``post_attention_residual_gate``,
``post_feedforward_residual_gate``, ``MuseSparkResidualGate``), per channel, where ``beta =
sigmoid(w)`` and ``alpha = sqrt(max(sigmoid(-w) * (1 + beta), eps))`` of the gate's weight
``w`` over its temperature. So ``input + attention_output + mlp_output == layer_output`` does
not hold; the block's identity (`GatedResidualLayer.identity`) does::

    h = alpha_1 * input + beta_1 * attention_output
    layer_output = alpha_2 * h + beta_2 * mlp_output

Each block's MLP is dense (``MuseSparkTextMLP``) or routed (``MuseSparkMoE``,
``mlp_layer_types``): a sigmoid router with a correction bias (`SparkMoe`) chooses the experts
of each token, which run in a narrower space (``moe_hidden_size``) the token is projected into
(``pre_expert_proj``, then ``pre_expert_norm``) and out of (``post_expert_proj``); each
expert's output is normed (``post_expert_norm``) before it is weighted.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import GroupRoutedMoe, Layer, adapter

SANDWICH = adapter("sandwich")


class MuseAttention(adapter("gated_attention"), SANDWICH["attention"]):
    """Muse's attention: head outputs read after the output gate, what it adds to the
    stream at the block's post-attention norm."""


def glimmer_envoys(part: Any) -> dict[type, type]:
    from transformers.models.muse_glimmer import modeling_muse_glimmer as muse

    return {muse.MuseGlimmerTextDecoderLayer: Layer, muse.MuseGlimmerTextAttention: MuseAttention,
            muse.MuseGlimmerTextMLP: SANDWICH["mlp"]}

def gate_weights(gate: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(alpha, beta)``, ``[hidden]``: what a residual gate weighs the residual and the
    sublayer's output by, computed as the module computes them."""
    w = gate.gate / gate.temperature
    beta = torch.sigmoid(w)
    return torch.sqrt(torch.clamp(torch.sigmoid(-w) * (1.0 + beta), min=gate.eps)), beta


class GatedResidualLayer(Layer):
    """A Muse Spark block: each sublayer's output added through a per-channel residual gate."""

    def identity_reads(self) -> tuple[str, ...]:
        return ("input", "self_attn.attention_output", "mlp.mlp_output", "layer_output")

    def identity(self, values: dict) -> torch.Tensor:
        """The residual gates' sums, in the stream's dtype as the gates return them."""
        stream = values["input"]
        for added, gate in ((values["self_attn.attention_output"], self._module.post_attention_residual_gate),
                            (values["mlp.mlp_output"], self._module.post_feedforward_residual_gate)):
            alpha, beta = gate_weights(gate)
            stream = (alpha * stream + beta * added).to(stream.dtype)
        return stream


class SparkMoe(GroupRoutedMoe):
    """Muse Spark's routed MLP: DeepSeek's sigmoid routing with one group and no shared
    expert (``shared_expert_output`` refused, saying so); ``router_logits`` are the router's linear scores before it multiplies them by its
    ``output_multiplier``; the experts read and write ``moe_hidden_size`` channels
    (``expert_hidden_size``); what the MLP adds to the stream is read at the block's
    post-feedforward norm (the sandwich)."""

    refuses = {"shared_expert_output": "Muse Spark's routed MLP has no shared expert: every token goes through its "
                                       "chosen experts alone"}
    mlp_output = SANDWICH["mlp"].mlp_output

    n_group = 1
    topk_group = 1

    def route(self, logits: Any) -> tuple[Any, Any]:
        """``(expert_weights, expert_indices)`` from ``router_logits`` as the router computes
        them: ``sigmoid(logits * output_multiplier)`` plus the correction bias chooses the
        ``top_k``; the chosen sigmoids, renormalized and times ``routed_scaling_factor``,
        weigh them (the indices sorted per token)."""
        router = self._module.get_submodule(self.router_module)
        scores = (logits.float() * router.output_multiplier).sigmoid()
        chosen = (scores + router.e_score_correction_bias.float()).topk(self.top_k, dim=-1).indices.sort(-1).values
        weights = scores.gather(1, chosen)
        weights = weights / (weights.sum(-1, keepdim=True) + router.norm_topk_prob_eps)
        return weights * self.routed_scaling_factor, chosen


def spark_envoys(part: Any) -> dict[type, type]:
    from transformers.models.muse_spark import modeling_muse_spark as spark

    return {spark.MuseSparkTextDecoderLayer: GatedResidualLayer, spark.MuseSparkTextAttention: MuseAttention,
            spark.MuseSparkTextMLP: SANDWICH["mlp"], spark.MuseSparkMoE: SparkMoe}
