"""`SparseAttention`: an attention whose keys are cut, per query, by an indexer.

DeepSeek's sparse attention (DSA; DeepSeek-V3.2, GLM-5-Next, Mistral Large 4) runs a small
scorer beside the attention (``self_attn.indexer``): it scores the keys (or pools of them)
each query may read, keeps the best ``index_topk``, and the attention reads those keys
alone. Some blocks run no indexer of their own: a ``"shared"`` block (``indexer_types``) is
handed the selection of the block before (``prev_topk_indices``) and reads the same keys.

The standard names, on ``self_attn``:

* ``indexer_scores`` ``[batch, queries, candidates]``: what the indexer ranks, after the
  candidates a query may not read are set to the lowest value; what a candidate is (a key,
  a pool of keys) the family's envoy class says. A write changes what is selected. Refused
  on a block that runs no indexer, naming the block whose selection it reuses;
* ``selected_keys`` ``[batch, queries, k]``: the indices of the keys each query may read,
  as the attention takes them (``-1``: none); the indexer's output on a block that runs
  one, the selection it is handed on a block that reuses one (`shared_at`). A write decides what the
  attention reads; on a block whose selection later blocks reuse it reaches them too
  (`reused_by` names them), on a reusing block it reaches that block alone;
* ``sparse_attention_mask`` ``[batch, 1, queries, keys]``: the mask the attention function
  finally applies, the selection joined to the causal and padding masks: boolean (True:
  read) or additive (0, or the dtype's lowest) as the attention implementation takes it. A
  write decides what this block's attention reads.

A block that runs no indexer and reuses none (a sliding-window block beside indexed ones)
refuses all three by name.

A family's class says where its indexer's scores are (`scores_operation`, an operation in
the indexer's forward) and what reuses a selection (`shared_selection`, the attention's
keyword argument); the attention function's call is `Attention.interface`'s.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..serving.sites import At
from ..serving.values import argument, value
from .text import Attention, _call

#: The standard names of an indexer's values.
INDEXER_VALUES = ("indexer_scores", "selected_keys", "sparse_attention_mask")


def _runs_indexer(attention: Any) -> bool:
    return getattr(attention._module, attention.indexer_module, None) is not None


def _source_block(attention: Any) -> int:
    """The block whose selection a reusing block reads: the nearest earlier one running an indexer."""
    layers = attention.parent.parent
    index = attention.parent.block_index
    while index > 0:
        index -= 1
        if getattr(getattr(layers[index]._module, "self_attn", None), attention.indexer_module, None) is not None:
            return index
    return attention.parent.block_index


def _reuses(attention: Any) -> bool:
    types = getattr(attention.root._module.config.get_text_config(), "indexer_types", None) or ()
    index = attention.parent.block_index
    return index < len(types) and types[index] == "shared"


def _no_indexer(attention: Any) -> str | None:
    """A block that neither runs an indexer nor reuses a selection (dots3.note's sliding-window
    blocks): every key its mask allows is read."""
    if _runs_indexer(attention) or _reuses(attention):
        return None
    return ("this block runs no indexer and reuses no selection (its layer_types entry is not an indexed one): "
            "every key its mask allows is read; read self_attn.attention_probabilities")


def _no_scores(attention: Any) -> str | None:
    if (missing := _no_indexer(attention)) is not None:
        return missing
    if not _runs_indexer(attention):
        source = _source_block(attention)
        return (f"this block runs no indexer: it reuses block {source}'s selection (indexer_types 'shared'); read "
                f"layers[{source}].self_attn.indexer_scores")
    if attention.scores_operation is None:
        return (f"{type(attention).__name__} does not say where its indexer's scores are; read "
                f"self_attn.selected_keys, what they select")
    return None


def _selection_at(attention: Any) -> str:
    if _runs_indexer(attention):
        return f"{attention.path}.{attention.indexer_module}.output"
    if attention.shared_at is not None:
        side = "output" if attention.shared_selection is None else "input"
        return f"{attention.path}.source.{attention.shared_at}.{side}"
    return f"{attention.path}.input"


def _read_selection(attention: Any, raw: Any) -> Any:
    if _runs_indexer(attention) or attention.shared_selection is None:
        return raw
    return raw[1][attention.shared_selection]


def _write_selection(attention: Any, raw: Any, new: Any) -> Any:
    if _runs_indexer(attention) or attention.shared_selection is None:
        return new
    args, kwargs = raw
    return args, {**kwargs, attention.shared_selection: new}


class SparseAttention(Attention):
    """An attention whose keys an indexer selects per query (see the module):
    ``indexer_scores``, ``selected_keys``, ``sparse_attention_mask``."""

    order = ("indexer_scores", "selected_keys", "attention_queries", "attention_keys", "attention_values",
             "sparse_attention_mask", "attention_scores", "attention_probabilities", "attention_head_outputs",
             "attention_output")
    refuses = {**Attention.refuses, "indexer_scores": _no_scores, "selected_keys": _no_indexer,
               "sparse_attention_mask": _no_indexer}
    #: The indexer's child module (``None`` on a block that reuses another's selection).
    indexer_module: ClassVar[str] = "indexer"
    #: nnsight's name for the operation in the indexer's forward whose output is its masked
    #: scores (``None``: the family does not serve them, and says so).
    scores_operation: ClassVar[str | None] = None
    #: The keyword argument a reusing block's selection is read at: the attention's own
    #: (``shared_at`` None), or that of the call ``shared_at`` names in its forward (where the
    #: selection is read after the latents, as a running indexer's would be); ``None``: the
    #: selection is the output of the operation ``shared_at`` names (an assignment of it, such
    #: as nnsight's ``topk_indices_1`` for ``topk_indices = prev_topk_indices``).
    shared_selection: ClassVar[str | None] = "prev_topk_indices"
    shared_at: ClassVar[str | None] = None

    indexer_scores = value(
        At(lambda a: f"{getattr(a, a.indexer_module).path}.source.{a.scores_operation}.output",
           inside=lambda a: getattr(a, a.indexer_module)),
        description="the indexer's scores of each query's candidates (masked ones at the lowest value), "
                    "[batch, queries, candidates]",
    )(lambda attention, raw: raw).writes(lambda attention, raw, new: new)
    selected_keys = value(
        _selection_at,
        description="the indices of the keys each query may read, [batch, queries, k] (-1: none); the indexer's "
                    "output, or the selection a reusing block is handed",
    )(_read_selection).writes(_write_selection)
    sparse_attention_mask = argument(
        4, lambda a: f"{_call(a)}.input",
        description="the mask the attention function applies, the selection joined to the causal mask, "
                    "[batch, 1, queries, keys] (boolean, True: read; or additive)",
    )

    def reused_by(self) -> list[int]:
        """The blocks that reuse this block's selection (the ``"shared"`` blocks after it)."""
        types = getattr(self.root._module.config.get_text_config(), "indexer_types", None) or ()
        following, found = self.parent.block_index + 1, []
        if not _runs_indexer(self):
            return found
        while following < len(types) and types[following] == "shared":
            found.append(following)
            following += 1
        return found
