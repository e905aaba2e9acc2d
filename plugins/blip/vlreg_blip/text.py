"""The OPT text model (BLIP-2's on Salesforce/blip2-opt-*), as a text part.

An OPT block (``OPTDecoderLayer``) is pre-norm: ``self_attn_layer_norm``, ``self_attn``, the
residual add, then ``final_layer_norm``, ``fc1``, the activation and ``fc2`` written inline
in the block (no MLP module), and the add. So:

* ``mlp`` is served at ``fc2`` (`OptMlp`, an `OutputProjection`), keyed by each block's path
  so no other ``fc2`` is touched. The block flattens the stream to ``[batch * seq, hidden]``
  around its MLP; ``mlp_output`` is served as ``[batch, seq, hidden]``, a view of ``fc2``'s
  output, so ``input + self_attn.attention_output + mlp.mlp_output == layer_output`` holds;
* ``input_layernorm`` and ``post_attention_layernorm`` name the block's two norms;
* the attention scales its queries by ``head_dim ** -0.5`` before it calls the attention
  function (which then scales by 1), so ``attention_queries`` are the scaled ones;
* the decoder adds learned position embeddings to what it is called with before the first
  block, so ``layers[0].input`` is not the embeddings as the scatter left them
  (`Scatter.embeddings_to`: `prompt_entry` reads them where the text model is called).

Post-norm OPT (``do_layer_norm_before`` false) is not served (`wrappers.declines`).
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import Attention, Layer, OutputProjection, argument, eager_only, value


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}.input"


class OptAttention(Attention):
    """An OPT block's attention: no rotary embedding, the queries scaled before the call."""

    refuses = {"attention_queries": eager_only, "attention_keys": eager_only}
    attention_queries = argument(
        1, _call, description="the queries, scaled by head_dim ** -0.5 (OPT scales them before the attention call)",
    )
    attention_keys = argument(2, _call, description="the keys (OPT has no rotary embedding)")


def _stream(mlp: Any, raw: torch.Tensor) -> torch.Tensor:
    rows = mlp.run.rows or 1
    return raw.view(rows, -1, raw.shape[-1])


class OptMlp(OutputProjection):
    """An OPT block's MLP, served at ``fc2``: ``mlp_output`` as ``[batch, seq, hidden]``."""

    mlp_output = value("output", description="what the MLP adds to the stream, [batch, seq, hidden]")(_stream).writes(
        lambda mlp, raw, new: new.reshape(raw.shape)
    )


def rename(part: Any) -> dict[str, str]:
    """Each block's norms and ``fc2``, keyed from the decoder by the block's path."""
    names: dict[str, str] = {}
    for i in range(part.config.num_hidden_layers):
        names[f"layers.{i}.self_attn_layer_norm"] = f"layers.{i}.input_layernorm"
        names[f"layers.{i}.final_layer_norm"] = f"layers.{i}.post_attention_layernorm"
        names[f"layers.{i}.fc2"] = f"layers.{i}.mlp"
    return names


def envoys(part: Any) -> dict[Any, type]:
    from transformers.models.opt import modeling_opt as opt

    return {opt.OPTDecoderLayer: Layer, opt.OPTAttention: OptAttention, "layers.*.fc2": OptMlp}
