"""MiniMax-M3-VL's text model (``minimax_m3_vl_text``) under the standard names.

Its blocks are Mixtral-shaped pre-norm blocks (Gemma's RMS norm, ``1 + weight``), changed in
three ways a reader must know:

* **Per-head query and key norms, partial rotary positions**: the standard `Attention` reads
  the attention function's call, after both.
* **A block-sparse indexer** on the blocks whose ``layer_types`` entry is
  ``"minimax_m3_sparse"`` (``self_attn.indexer``, ``MiniMaxM3VLIndexer``): it scores key
  blocks of ``index_block_size`` per query and key group and keeps the ``index_topk_blocks``
  best, the query's own ``index_local_blocks`` among them; the attention's mask is built from
  that selection in the same forward. vlreg has no standard names for an indexer's values yet:
  they are refused by name (`INDEXER_REFUSED`), never served approximately. The attention values
  are what the attention function computes with the selection applied.
* **Sigmoid-routed experts after shared experts** (`SigmoidRoutedMoe`): the shared experts
  run first; the router scores experts with a sigmoid, chooses by the scores plus a learned
  correction bias, weighs by the scores renormalized; the routed sum is multiplied by
  ``routed_scaling_factor`` before the shared output is added. Dense blocks hold a fused
  ``gate_up_proj`` MLP (`FusedMlp`).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, GroupRoutedMoe, Layer, Mlp, MoeMlp, modeling_envoys, value


class FusedMlp(Mlp):
    """A dense MLP whose gate and up projections are one ``gate_up_proj``."""

    @property
    def intermediate_size(self) -> int:
        """The MLP's hidden width (``gate_up_proj`` projects to twice it)."""
        return int(self._module.down_proj.in_features)


class SigmoidRoutedMoe(GroupRoutedMoe):
    """MiniMax-M3's experts (``MiniMaxM3VLSparseMoeBlock``): the shared experts first, then a
    router that scores each expert with a **sigmoid** of ``router_logits``, chooses each token's
    ``top_k`` by those scores plus ``e_score_correction_bias`` (one group: no group stage) and
    weighs them by their scores without the bias, renormalized to sum to 1. The block multiplies
    the experts' weighted sum (``routed_output``) by ``routed_scaling_factor`` and adds the
    shared experts' output."""

    order = MoeMlp.order
    expert_weights = value(
        lambda mlp: f"{mlp.gate.path}.output", layout="tokens",
        description="each chosen expert's sigmoid score, renormalized to sum to 1, [tokens, top_k]",
    )(lambda mlp, raw: raw[1]).writes(lambda mlp, raw, new: (raw[0], new, raw[2]))

    @property
    def routed_scaling_factor(self) -> float:
        """What the block multiplies the experts' weighted sum by."""
        return float(self._module.routed_scaling_factor)

    n_group = 1
    topk_group = 1

    def route(self, logits: Any) -> tuple[Any, Any]:
        """``(expert_weights, expert_indices)`` as this router computes them from ``logits``
        (``[tokens, experts]``), the indices sorted per token."""
        scores = logits.float().sigmoid()
        indices = (scores + self._module.gate.e_score_correction_bias.float()).topk(self.top_k, dim=-1).indices
        indices = indices.sort(-1).values
        weights = scores.gather(1, indices)
        return weights / weights.sum(-1, keepdim=True), indices


#: The indexer's values, refused by name: what each query's selection is and how to read it natively.
_INDEXER = ("vlreg has no standard names for a sparse-attention indexer yet; read it natively: on a block whose "
            "layer_types entry is 'minimax_m3_sparse', model.layers[i].self_attn.indexer.output is the "
            "[batch, key heads, queries, index_topk_blocks] indices of the key blocks each query may read (-1: an "
            "unused slot), and self_attn.attention_probabilities already holds 0 off the selection")
INDEXER_REFUSED = {f"self_attn.{name}": _INDEXER for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}

envoys = modeling_envoys("minimax_m3_vl", {
    "MiniMaxM3VLDecoderLayer": Layer, "MiniMaxM3VLAttention": Attention, "MiniMaxM3VLDenseMLP": FusedMlp,
    "MiniMaxM3VLSparseMoeBlock": SigmoidRoutedMoe})
