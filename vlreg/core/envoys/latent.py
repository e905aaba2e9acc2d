"""`LatentAttention`: multi-head latent attention (MLA, DeepSeek-V2's and V3's design).

The block's stream is projected to two small latents before any head is formed: the
keys' and values' (``kv_a_proj_with_mqa``, then ``kv_a_layernorm``: ``kv_lora_rank``
wide, one for every head) beside one rotary key shared by the heads, and, where the
checkpoint has a query LoRA (``q_lora_rank``), the queries' (``q_a_proj``, then
``q_a_layernorm``). The heads' keys and values are expanded from the key-value latent
(``kv_b_proj``), the queries from the query latent (``q_b_proj``). The generation cache
holds the key-value latent, not the heads' keys and values.

So beside the standard interior, read where the attention function is called as on any
`Attention` (queries and keys ``qk_head_dim`` wide: a part without positions, then the
rotary part; values and head outputs ``v_head_dim`` wide), it serves:

* ``kv_latents`` ``[batch, seq, kv_lora_rank]``: ``kv_a_layernorm``'s output, what the
  cache holds; a write reaches every head's keys (their part without positions) and values;
* ``query_latents`` ``[batch, seq, q_lora_rank]``: ``q_a_layernorm``'s output, refused
  where the queries are projected directly (``q_lora_rank`` is None).

``head_dim`` is the width of a value head (``v_head_dim``): the module keeps no
``head_dim``, and its queries and keys are wider (``qk_head_dim``).
"""

from __future__ import annotations

from typing import Any

from ..serving.values import argument, returned
from .text import Attention, _call, _size


def _no_query_lora(attention: Any) -> str | None:
    if getattr(attention._module, "q_a_layernorm", None) is not None:
        return None
    return "this attention projects its queries from the stream directly (q_lora_rank is None): no query latent forms"


class LatentAttention(Attention):
    """Multi-head latent attention: the standard interior, plus the latents the heads are
    expanded from (``query_latents``, ``kv_latents``)."""

    order = ("query_latents", "kv_latents", "attention_queries", "attention_keys", "attention_values",
             "attention_scores", "attention_probabilities", "attention_head_outputs", "attention_output")
    refuses = {**Attention.refuses, "query_latents": _no_query_lora}

    # the values are one of the views torch.split returns, which torch forbids editing in
    # place: served as a copy written back
    attention_values = argument(3, lambda a: f"{_call(a)}.input", copy=True, description="the values")
    query_latents = returned(
        lambda a: f"{a.path}.q_a_layernorm.output",
        description="the query latent (q_a_layernorm's output), [batch, seq, q_lora_rank]; q_b_proj makes the queries of it",
    )
    kv_latents = returned(
        lambda a: f"{a.path}.kv_a_layernorm.output",
        description="the key-value latent (kv_a_layernorm's output, what the cache holds), [batch, seq, kv_lora_rank]; "
                    "kv_b_proj makes every head's keys and values of it",
    )

    @property
    def head_dim(self) -> int:
        """The width of one value head (``v_head_dim``): what each head outputs."""
        return _size(self, "head_dim", (self._module, "v_head_dim"))

    @property
    def kv_lora_rank(self) -> int:
        """The width of the key-value latent."""
        return _size(self, "kv_lora_rank", (self._module, "kv_lora_rank"))

    @property
    def q_lora_rank(self) -> int:
        """The width of the query latent (`Unavailable` where the queries have none)."""
        return _size(self, "q_lora_rank", (self._module, "q_lora_rank"))

    @property
    def qk_rope_head_dim(self) -> int:
        """The rotary part of each query and key head (their last ``qk_rope_head_dim``
        dimensions; the rotary key is shared by every head)."""
        return _size(self, "qk_rope_head_dim", (self._module, "qk_rope_head_dim"))
