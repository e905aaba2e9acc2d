"""The Cohere2 text model (Command R7B's, Command A's), as a text part any wrapper can host.

A block is *parallel*: one norm (``input_layernorm``, Cohere's mean-centred LayerNorm
without a bias), and the attention and the MLP both read its output, so the block
returns ``input + self_attn.attention_output + mlp.mlp_output`` (that plain sum is the
block identity; there is no ``post_attention_layernorm``, and the MLP's input is not the
stream after the attention).

Position encoding differs by block (``config.layer_types``): a ``sliding_attention``
block rotates its queries and keys (Cohere's interleaved rope) and attends within
``sliding_window`` tokens; a ``full_attention`` block uses no position encoding at all
(its queries and keys are the projections as they are). `CohereAttention` says so in
its values' descriptions.

Only the text part of the vision-language families is served here, not a base Cohere2
checkpoint (``Cohere2ForCausalLM``). Cohere's forward scales the logits by
``logit_scale``: Aya Vision's does from transformers 5.25 (5.23 and 5.24 return
``lm_head``'s output as it is), Command A Vision's does not; vlreg's readout applies the
scale wherever the wrapper's forward does (`vlreg.core.envoys.readout.logit_scale`), so
``logits`` and the logit lens are the model's own on either release.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, argument, eager_only

MODEL_TYPES = ("cohere2",)


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}.input"


class CohereAttention(Attention):
    """A Cohere2 block's attention: rope on sliding-window blocks only."""

    refuses = {"attention_queries": eager_only, "attention_keys": eager_only}
    attention_queries = argument(
        1, _call,
        description="the queries: rotated on sliding-window blocks, as projected on full-attention blocks (no rope)",
    )
    attention_keys = argument(
        2, _call,
        description="the keys: rotated on sliding-window blocks, as projected on full-attention blocks (no rope)",
    )


def envoys(part: Any) -> dict[type, type]:
    """Cohere2's module classes onto the standard envoys, its attention on `CohereAttention`."""
    from transformers.models.cohere2 import modeling_cohere2 as cohere2

    return {cohere2.Cohere2DecoderLayer: Layer, cohere2.Cohere2Attention: CohereAttention, cohere2.Cohere2MLP: Mlp}
