"""GIT's text stack (the wrapper's own config, ``git``): BERT's post-norm blocks.

A block (``GitLayer``) is BERT's: ``attention`` (``GitAttention``: ``self``, the heads,
then ``output``, which maps them back with ``dense`` and norms the residual sum with its
``LayerNorm``), then ``intermediate`` (``dense`` and the activation) and ``output``
(``dense``, then ``LayerNorm`` of the residual sum). Served so:

* ``self_attn`` is the ``attention`` module (`BertAttention`); its ``o_proj`` is
  ``attention.output.dense``, and ``attention_output`` that projection's output, what is
  added to the stream before the norm; the interior is read inside ``attention.self``,
  which computes the heads inline (no attention function: eager is the only
  implementation transformers has for it);
* ``mlp`` is the block's last projection, ``output.dense`` (`OutputProjection`);
* the norms after each residual add are ``self_attn_layer_norm`` and ``final_layer_norm``
  (`PostNormLayer`), so ``layer_output == final_layer_norm(h + mlp_output)`` with
  ``h == self_attn_layer_norm(input + self_attn.attention_output)``.

Every key is keyed from the stack by block (``layer.<i>. ...``): a BERT sublayer's
``output`` and ``dense`` are names other modules hold too. nnsight mounts each ``output``
submodule as ``E_output`` (``output`` is a module's output), which the keys walk.
"""

from __future__ import annotations

import warnings
from typing import Any

from vlreg.plugin import At, Attention, OutputProjection, PostNormLayer, argument, returned, value

# nnsight mounts each BERT sublayer's ``output`` submodule as ``E_output``, with a warning per
# module on every load; that is said here once instead.
warnings.filterwarnings("ignore", message=r"Module 'model\.git\.encoder\.layer\.\d+(\.attention)?' has a submodule named 'output'")


def _inner(attention: Any) -> Any:
    return attention.__dict__["self"]


def _at(operation: str) -> At:
    """An operation in ``attention.self``'s forward, where the heads are computed."""
    return At(lambda attention: f"{_inner(attention).path}.source.{operation}", inside=_inner)


class BertAttention(Attention):
    """A BERT attention (``attention``): the heads computed inline in ``attention.self``,
    mapped back by ``attention.output.dense`` (``o_proj``) before the block's norm. The
    queries, keys and values are read where this forward projects them (each split into
    heads), the keys and values before a generation step's cache joins the earlier
    positions' (the scores and pattern span those too)."""

    attention_queries = returned(_at("transpose_0.output"), description="the queries (no rotary embedding)")
    attention_keys = returned(_at("transpose_1.output"),
                              description="this forward's keys (no rotary embedding), before the cache joins them")
    attention_values = returned(_at("transpose_2.output"), description="this forward's values, before the cache joins them")
    attention_scores = argument(0, _at("nn_functional_softmax_0.input"),
                                description="query-key scores before the softmax, scaled, mask added")
    attention_probabilities = returned(_at("self_dropout_0.output"), description="the pattern that weights the values")
    attention_head_outputs = value(_at("torch_matmul_1.output"), description="each head's output, before o_proj")(
        lambda attention, raw: raw.transpose(1, 2)
    ).writes(lambda attention, raw, new: new.transpose(1, 2))
    attention_output = returned(lambda attention: f"{attention.o_proj.path}.output",
                                description="what the attention adds to the stream, before the block's norm")

    @property
    def num_heads(self) -> int:
        return int(_inner(self)._module.num_attention_heads)

    @property
    def head_dim(self) -> int:
        return int(_inner(self)._module.attention_head_size)


def rename(part: Any) -> dict[str, str]:
    """Each block's attention, its output projection and norms, and its MLP's last projection."""
    names: dict[str, str] = {}
    for i in range(part.config.num_hidden_layers):
        block = f"layer.{i}"
        names |= {
            f"{block}.attention": f"{block}.self_attn",
            f"{block}.attention.E_output.dense": f"{block}.attention.o_proj",
            f"{block}.attention.E_output.LayerNorm": f"{block}.self_attn_layer_norm",
            f"{block}.E_output.dense": f"{block}.mlp",
            f"{block}.E_output.LayerNorm": f"{block}.final_layer_norm",
        }
    return names


def envoys(part: Any) -> dict[Any, type]:
    from transformers.models.git import modeling_git as git

    return {git.GitLayer: PostNormLayer, git.GitAttention: BertAttention, "layer.*.output.dense": OutputProjection}
