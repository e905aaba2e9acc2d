"""Mistral Large 4's text model (``mistral_large4_text``) under the standard names.

Its blocks are DeepSeek's, changed in four ways a reader must know:

* **Latent attention without a query latent** (`LatentAttention`): the queries are projected
  from the stream directly (``q_proj``), so ``query_latents`` is refused; a learned
  per-head scaling by the log of the position multiplies the queries before the attention
  function (the served queries are scaled).
* **Keys and values shared across blocks** (``kv_source_layers``): a block whose entry
  names an earlier block builds no key-value latent of its own (no ``kv_a_proj_with_mqa``)
  and expands that block's instead, so ``kv_latents`` is refused there, naming the block to
  read; a write to the source block's ``kv_latents`` reaches every block that reuses it.
  A block whose latent later blocks reuse cannot be skipped without them (`Large4Layer`).
* **A DSA indexer** (``self_attn.indexer``, ``MistralLarge4TextIndexer``) picks the
  ``index_topk`` keys each query may read; ``"shared"`` blocks (``indexer_types``) reuse the
  selection of the block before. The standard names (`vlreg.plugin.SparseAttention`) are not
  declared here yet (a reusing block's selection forms in no call to read it at): they are
  refused by name (`INDEXER_REFUSED`), never served approximately. The attention
  values are what the attention function computes with the selection applied.
* **Softmax group routing** (`SoftmaxGroupRoutedMoe`): the router scores experts with a
  softmax, not DeepSeek's sigmoid, and has no correction bias.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import GroupRoutedMoe, Layer, LatentAttention, Mlp, modeling_envoys


def _reused_latent(attention: Any) -> str | None:
    index = attention._module.layer_idx
    source = attention.root._module.config.get_text_config().kv_source_layers[index]
    if source == index:
        return None
    return (f"this block builds no key-value latent: it reuses block {source}'s (kv_source_layers); read or edit "
            f"layers[{source}].self_attn.kv_latents, which reaches this block too")


class Large4Attention(LatentAttention):
    """Mistral Large 4's latent attention: queries straight from the stream, the key-value
    latent maybe an earlier block's."""

    refuses = {**LatentAttention.refuses, "kv_latents": _reused_latent}


class Large4Layer(Layer):
    """A Mistral Large 4 block: returns ``(stream, topk_indices)``; later blocks may read
    its key-value latent or its indexer's selection."""

    returns_tuple = True

    def skipped_output(self) -> Any:
        """The stream it takes, and the selection it was handed (``prev_topk_indices``), as a
        ``"shared"`` block hands it on: the next block receives what this one did."""
        _, kwargs = self.inputs
        return (self.input, kwargs.get("prev_topk_indices"))

    def why_not_skipped(self, skipped: range) -> str | None:
        """A block whose key-value latent later blocks reuse, or whose indexer selection the
        next ``"shared"`` blocks reuse, cannot be skipped unless they are too."""
        config = self.root._module.config.get_text_config()
        index = self.block_index
        readers = [i for i, source in enumerate(config.kv_source_layers) if source == index and i != index]
        following = index + 1
        while following < len(config.indexer_types) and config.indexer_types[following] == "shared":
            readers.append(following)
            following += 1
        waiting = sorted({i for i in readers if i not in skipped})
        if not waiting:
            return None
        return (f"layers {waiting} reuse its key-value latent (kv_source_layers) or its indexer's selection "
                f"(indexer_types 'shared') and cannot run without them; skip them too")


def _route(mlp: Any, logits: Any) -> tuple[Any, Any]:
    import torch

    router = mlp._module.get_submodule(mlp.router_module)
    scores = logits.float().softmax(-1)
    grouped = scores.view(len(scores), mlp.n_group, -1)
    best = grouped.topk(2, dim=-1).values.sum(-1).topk(mlp.topk_group, dim=-1).indices
    allowed = torch.zeros_like(grouped[..., 0]).scatter(1, best, 1).bool()
    choice = grouped.masked_fill(~allowed[..., None], 0.0).view(len(scores), -1)
    indices = choice.topk(mlp.top_k, dim=-1).indices.sort(-1).values
    weights = scores.gather(1, indices)
    weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return weights * router.routed_scaling_factor, indices


class SoftmaxGroupRoutedMoe(GroupRoutedMoe):
    """Mistral 4's experts (``Mistral4MoE``): DeepSeek's groups and shared experts, but the
    router scores every expert with a **softmax** of ``router_logits`` (no correction
    bias), chooses among the ``topk_group`` best groups by those scores, and weighs the
    chosen experts by them renormalized to sum to 1, times ``routed_scaling_factor``."""

    def route(self, logits: Any) -> tuple[Any, Any]:
        """``(expert_weights, expert_indices)`` as this router computes them from
        ``logits``, the indices sorted per token."""
        return _route(self, logits)


#: The indexer's values, refused by name: what each query's selection is and how to read it natively.
_INDEXER = ("Mistral Large 4's attention is not declared on the standard sparse-attention names "
            "(vlreg.plugin.SparseAttention) yet; read it natively: "
            "model.layers[i].self_attn.indexer.output is the [batch, seq, index_topk] indices of the keys each query "
            "may read (on a block whose indexer_types entry is 'full'; a 'shared' block reuses the previous one's), "
            "and self_attn.attention_probabilities already holds 0 off the selection")
INDEXER_REFUSED = {f"self_attn.{name}": _INDEXER for name in ("indexer_scores", "selected_keys", "sparse_attention_mask")}

envoys = modeling_envoys("mistral_large4", {
    "MistralLarge4TextDecoderLayer": Large4Layer, "MistralLarge4TextAttention": Large4Attention,
    "MistralLarge4TextMLP": Mlp, "MistralLarge4TextMoE": SoftmaxGroupRoutedMoe})
