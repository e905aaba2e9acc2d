"""dots3.note's text blocks (``dots3_note_text``, DeepSeek-V3.2's), under the standard names.

* **Attention** (`DotsAttention`): multi-head latent attention (`vlreg.plugin.LatentAttention`)
  whose latents are rescaled after their norms and whose shared rotary key is normed too; its
  heads are gated (``sigmoid(g_proj(x))``, one gate per head) before ``o_proj``, so
  ``attention_head_outputs`` is read where ``o_proj`` receives them, after the gate (the
  ``"gated_attention"`` adapter's read). ``layer_types`` says each block's kind:
  ``"indexed_attention"`` blocks run a DSA indexer (`vlreg.plugin.SparseAttention`: each query
  reads the ``index_topk`` keys it scores best), ``"sliding_attention"`` blocks a sliding window
  and no indexer (the indexer's values are refused there by name).
* **MLP**: a dense MLP on ``"dense"`` blocks (``mlp_layer_types``), DeepSeek-V3's routed experts
  beside shared experts elsewhere (`vlreg.plugin.GroupRoutedMoe`).
"""

from __future__ import annotations

from vlreg.plugin import GroupRoutedMoe, Layer, LatentAttention, Mlp, SparseAttention, adapter, modeling_envoys

GATED = adapter("gated_attention")


class DotsAttention(SparseAttention, LatentAttention, GATED):
    """dots3.note's attention: latent, gated per head, its keys cut by a DSA indexer on
    ``"indexed_attention"`` blocks (the indexer's scores ``[batch, queries, keys]``)."""

    order = ("query_latents", "kv_latents", *SparseAttention.order)
    refuses = {**LatentAttention.refuses, **SparseAttention.refuses, **GATED.refuses}

    @property
    def scores_operation(self) -> str:
        """Where the indexer's scores meet the causal mask: masked (a boolean mask, sdpa) or
        added (an additive one, eager)."""
        boolean = self.root._module.config.get_text_config()._attn_implementation != "eager"
        return "index_scores_masked_fill_0" if boolean else "index_scores_2"


envoys = modeling_envoys("dots3_note", {
    "Dots3NoteTextDecoderLayer": Layer, "Dots3NoteTextAttention": DotsAttention, "Dots3NoteTextMLP": Mlp,
    "Dots3NoteTextMoE": GroupRoutedMoe})
