"""Llama 4's text blocks: their MLP (``feed_forward``) named ``mlp`` (`TEXT_RENAME`), and its
mixture of experts as `MoeMlp` values.

Llama 4's MoE block (``feed_forward`` of every ``interleave_moe_layer_step``-th block; the
others hold a dense MLP) differs from the routers `MoeMlp` was written on:

* its router (``router``) keeps each token's ``top_k`` largest logits and passes them
  through a **sigmoid**, with no softmax and no renormalization: ``expert_weights`` are
  ``sigmoid(router_logits)`` at the chosen experts, each in (0, 1), not summing to 1;
  the router hands them on as ``[tokens, experts]`` scores, 0 at every expert not chosen;
* the weight scales the expert's **input**, not its output: every expert runs on every
  token, ``expert(weight * x)``, so an expert not chosen gets zeros and adds zeros. No
  slot's output is held apart from the others' (the experts return ``[experts * tokens,
  hidden]``, one row per expert and token), so ``expert_outputs`` is unavailable;
  ``routed_output``, their sum over experts, is served where the block sums them;
* the shared expert's output is the tensor the routed sum is then added to in place
  (``out.add_(...)``), so ``shared_expert_output`` is served as a copy (what the shared
  expert returned, not what the sum later makes of it) and the model is handed a copy of
  it back, so that edits land and the one served is never added into.

``expert_indices`` and ``expert_weights`` are both read where the router returns its
scores beside its logits: the slots are the experts whose score is not 0, largest logit
first, and the weights the scores there, ``[tokens, top_k]``, as copies whose edits are
written back into the scores (a slot written to another expert takes its weight there).
A chosen expert whose sigmoid rounds to 0 (a logit below about -88) adds nothing and is
read as one not chosen.
"""

from __future__ import annotations

from typing import Any

import torch

from vlreg.plugin import At, Attention, Layer, Mlp, MoeMlp, returned, value

#: A block holds its MLP at ``feed_forward``.
TEXT_RENAME = {"feed_forward": "mlp"}

NO_SLOTS = (
    "Llama 4 scales each expert's input by its routing weight and runs every expert on every "
    "token (an expert not chosen gets zeros and returns zeros), so no slot's output is held apart; "
    "read mlp.routed_output (their sum), or mlp.experts.output, [experts * tokens, hidden], one "
    "row per expert and token"
)


def _slots(scores: torch.Tensor, logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """The slots the router filled, largest logit first: its scores are 0 at every other
    expert, so the top-k of the logits where the scores are not 0 (after a write to
    ``expert_indices``, the experts written)."""
    chosen = torch.where(scores != 0, logits, torch.finfo(logits.dtype).min)
    return torch.topk(chosen, top_k, dim=1).indices


def _weights(mlp: Any, raw: Any) -> torch.Tensor:
    scores, logits = raw
    return scores.gather(1, _slots(scores, logits, mlp.top_k))


def _put_weights(mlp: Any, raw: Any, new: torch.Tensor) -> Any:
    scores, logits = raw
    return scores.scatter(1, _slots(scores, logits, mlp.top_k), new.to(scores.dtype)), logits


def _indices(mlp: Any, raw: Any) -> torch.Tensor:
    scores, logits = raw
    return _slots(scores, logits, mlp.top_k)


def _put_indices(mlp: Any, raw: Any, new: torch.Tensor) -> Any:
    """Each slot's weight moved to the expert written; an index past the last expert
    routes the slot nowhere (transformers' convention for its other experts)."""
    scores, logits = raw
    if (new < 0).any():
        raise ValueError(f"{mlp.label('expert_indices')} takes experts 0 to {mlp.num_experts - 1}, not negative ones")
    weights = _weights(mlp, raw)
    experts = scores.shape[1]
    wide = scores.new_zeros(scores.shape[0], experts + 1).scatter(1, new.clamp(max=experts), weights)
    return wide[:, :experts].contiguous(), logits


class Llama4Moe(MoeMlp):
    """Llama 4's MoE block (``Llama4TextMoe``): a sigmoid router, every expert run on
    every token with its input scaled by its weight, a shared expert."""

    router_module = "router"
    sourced = True  # routed_output is read where the block sums the experts
    order = ("router_logits", "expert_indices", "expert_weights", "expert_outputs", "shared_expert_output",
             "routed_output", "mlp_output")
    refuses = {"expert_outputs": NO_SLOTS}

    router_logits = value(
        At(lambda mlp: f"{mlp.router.path}.source.forward_0.output", inside=lambda mlp: mlp.router), layout="tokens",
        description="the router's score of each expert per token, [tokens, experts]; a write reroutes",
    )(lambda mlp, raw: raw).writes(lambda mlp, raw, new: new)
    expert_indices = value(
        lambda mlp: f"{mlp.router.path}.output", layout="tokens",
        description="the expert in each token's slots, [tokens, top_k], largest logit first; a write moves the slot",
    )(_indices).writes(_put_indices).transform(lambda mlp, view, raw: _put_indices(mlp, raw, view))
    expert_weights = value(
        lambda mlp: f"{mlp.router.path}.output", layout="tokens",
        description="sigmoid of each chosen expert's router logit, [tokens, top_k]; scales the expert's input",
    )(_weights).writes(_put_weights).transform(lambda mlp, view, raw: _put_weights(mlp, raw, view))
    expert_outputs = value(
        "output", layout="tokens",
        description="each slot's expert output (unavailable: Llama 4 keeps no slot apart)",
    )(lambda mlp, raw: raw)
    shared_expert_output = value(
        lambda mlp: f"{mlp.shared_expert.path}.output", layout="tokens",
        description="the shared expert's own output, [tokens, hidden] (a copy: the block adds the routed sum into it)",
    )(lambda mlp, raw: raw.clone()).writes(lambda mlp, raw, new: new).transform(lambda mlp, view, raw: view.clone())
    routed_output = returned(
        "source.sum_0.output", layout="tokens",
        description="the experts' outputs summed over experts per token, [tokens, hidden]",
    )
    mlp_output = returned(
        At(lambda mlp: f"{mlp.parent.path}.source.hidden_states_view_0.output", inside=lambda mlp: mlp.parent),
        description="what the block adds to the stream, shared and routed, [batch, seq, hidden]",
    )

    @property
    def intermediate_size(self) -> int:
        """One expert's hidden width."""
        return int(self._module.experts.intermediate_size)


def text_envoys(part: Any) -> dict:
    from transformers.models.llama4 import modeling_llama4 as llama4

    return {
        llama4.Llama4TextDecoderLayer: Layer,
        llama4.Llama4TextAttention: Attention,
        llama4.Llama4TextMLP: Mlp,  # the dense blocks' MLP, and the shared expert
        llama4.Llama4TextMoe: Llama4Moe,
    }
