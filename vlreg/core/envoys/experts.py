"""`MoeMlp`: a block's MLP that routes each token to a few of many experts.

Served on the sparse-MLP layout transformers 5 gives its mixture-of-experts models: a
router module (``gate``) that maps each token to ``router_logits``, keeps the ``top_k``
experts of the softmax and renormalizes their weights, and an experts module
(``experts``) holding every expert's weights as 3-D tensors, run through transformers'
experts interface; some families add a shared expert every token goes through.

Tokens are the batch's rows flattened, ``[batch * seq]``. The values, in forward order:

* ``router_logits`` ``[tokens, experts]``: read where the router computes them, so a
  write changes the routing (the softmax, top-k and weights are recomputed from it);
* ``expert_weights`` and ``expert_indices`` ``[tokens, top_k]``: the routing the experts
  receive (renormalized weights; which expert fills each slot);
* ``expert_outputs`` ``[tokens, top_k, hidden]``: each slot's expert output *weighted* by
  its routing weight, as the experts sum them (the grouped and batched implementations
  form it; the eager loop over experts does not, so it is unavailable there);
* ``routed_output`` ``[tokens, hidden]``: the experts module's output,
  ``expert_outputs.sum(1)`` in the model's dtype;
* ``shared_expert_output`` ``[tokens, hidden]``: the shared expert's own output, before
  any gate the family scales it by (Qwen3.5-MoE: ``sigmoid(shared_expert_gate(x))``);
* ``mlp_output``: what the block adds to the stream, the routed output (plus the gated
  shared expert's) reshaped to ``[batch, seq, hidden]``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..serving.drilled import inside
from ..serving.sites import At
from ..serving.values import returned, value, with_first
from .patches import VisionMlp
from .text import Mlp, _size

#: Experts implementations whose forward forms every slot's weighted output.
SLOTTED = ("grouped_mm", "batched_mm")


def _implementation(mlp: Any) -> str:
    config = getattr(mlp._module.get_submodule(mlp.experts_module), "config", None)
    return getattr(config, "_experts_implementation", None) or "eager"


def _slotted(mlp: Any) -> str | None:
    implementation = _implementation(mlp)
    if implementation in SLOTTED:
        return None
    return (
        f"the experts run as {implementation!r}, a loop over experts that never holds every slot's "
        f"output at once; load with experts_implementation='grouped_mm' (the default) or 'batched_mm'"
    )


def _no_shared_expert(mlp: Any) -> str | None:
    if mlp.shared_expert_module and hasattr(mlp._module, mlp.shared_expert_module):
        return None
    return "this MLP has no shared expert"


def _routing(index: int) -> Any:
    def rebuild(mlp: Any, raw: Any, new: Any) -> Any:
        return (*raw[:index], new, *raw[index + 1 :])

    return lambda mlp, raw: raw[index], rebuild


def _layout(mlp: Any) -> str:
    return mlp.token_layout


def _router(mlp: Any) -> Any:
    return getattr(mlp, mlp.router_module)


def _experts_call(mlp: Any) -> str:
    """The weighted slot outputs inside the experts function the module dispatches to
    (known only at the call, so drilled in the trace)."""
    experts = getattr(mlp, mlp.experts_module)
    return inside(getattr(experts.source, mlp.experts_interface), "weighted_out_view_0.output")


class MoeMlp(Mlp):
    """A sparse MLP: a router, experts held as 3-D tensors, maybe a shared expert.

    ``router_module``, ``experts_module`` and ``shared_expert_module`` name its children
    (``gate``, ``experts``, ``shared_expert`` on the Qwen MoE lines); a family whose
    children are named otherwise sets them in a subclass.
    """

    router_module: ClassVar[str] = "gate"
    experts_module: ClassVar[str] = "experts"
    shared_expert_module: ClassVar[str | None] = "shared_expert"
    #: nnsight's name for the experts module's call to the experts function.
    experts_interface: ClassVar[str] = "experts_forward_1"
    #: nnsight's name for the router's call that computes the logits (``F.linear``;
    #: Aria's router spells it ``nn.functional.linear``).
    router_call: ClassVar[str] = "F_linear_0"
    #: How its token values hold a batch of several invokes (`vlreg.core.serving.batching`):
    #: every row's tokens, ``"tokens"``; a bank of `ModalityExperts` takes some tokens only, ``"whole"``.
    token_layout: ClassVar[str] = "tokens"
    order = ("shared_expert_output", "router_logits", "expert_weights", "expert_indices", "expert_outputs",
             "routed_output", "mlp_output")
    refuses = {"expert_outputs": _slotted, "shared_expert_output": _no_shared_expert}

    router_logits = value(
        At(lambda mlp: f"{_router(mlp).path}.source.{mlp.router_call}.output", inside=_router), layout=_layout,
        description="the router's score of each expert per token, [tokens, experts]; a write reroutes",
    )(lambda mlp, raw: raw).writes(lambda mlp, raw, new: new)
    expert_weights = value(
        lambda mlp: f"{_router(mlp).path}.output", layout=_layout,
        description="each token's routing weights, [tokens, top_k]",
    )(_routing(1)[0]).writes(_routing(1)[1])
    expert_indices = value(
        lambda mlp: f"{_router(mlp).path}.output", layout=_layout,
        description="the expert in each token's slots, [tokens, top_k]",
    )(_routing(2)[0]).writes(_routing(2)[1])
    expert_outputs = value(
        _experts_call, layout=_layout,
        description="each slot's expert output weighted by its routing weight, [tokens, top_k, hidden]",
    )(lambda mlp, raw: raw).writes(lambda mlp, raw, new: new)
    routed_output = returned(
        lambda mlp: f"{getattr(mlp, mlp.experts_module).path}.output", layout=_layout,
        description="the experts' weighted sum per token, [tokens, hidden]",
    )
    shared_expert_output = value(
        lambda mlp: f"{getattr(mlp, mlp.shared_expert_module).path}.output", layout=_layout,
        description="the shared expert's own output, before its gate, [tokens, hidden]",
    )(lambda mlp, raw: raw).writes(with_first)

    @property
    def num_experts(self) -> int:
        """Experts to route among."""
        router = self._module.get_submodule(self.router_module)
        return _size(self, "num_experts", (router, "num_experts"))

    @property
    def top_k(self) -> int:
        """Experts each token is routed to."""
        router = self._module.get_submodule(self.router_module)
        return _size(self, "top_k", (router, "top_k"))

    @property
    def intermediate_size(self) -> int:
        """One expert's hidden width."""
        experts = self._module.get_submodule(self.experts_module)
        return _size(self, "intermediate_size", (experts, "intermediate_dim"))

    @property
    def expert_hidden_size(self) -> int:
        """The width the experts read and write (``routed_output``'s, ``expert_outputs``'): the
        model's, except on an MLP that projects each token into a narrower space for its
        experts and back (Muse Spark's ``pre_expert_proj``, ``post_expert_proj``), the experts
        module's own ``hidden_dim``."""
        experts = self._module.get_submodule(self.experts_module)
        found = getattr(experts, "hidden_dim", None)
        return int(found) if found is not None else self.root.hidden_size


class SharedExpertsAfter(MoeMlp):
    """A sparse MLP whose shared experts (``shared_experts``) run after the routed ones, on
    every token, and are added to their sum (GLM-4.5V's, NemotronH's, Aria's)."""

    shared_expert_module = "shared_experts"
    order = ("router_logits", "expert_weights", "expert_indices", "expert_outputs", "routed_output",
             "shared_expert_output", "mlp_output")


def _tokens(mlp: Any, raw: Any) -> Any:
    """``[batch, seq, hidden]`` as ``[tokens, hidden]`` (a view)."""
    return raw.view(-1, raw.shape[-1])


class GroupRoutedMoe(SharedExpertsAfter):
    """DeepSeek-V3's mixture of experts (GLM-4.5V's and Kimi K2.5's too): a router whose
    ``gate`` returns ``(router_logits, expert_weights, expert_indices)``.

    It scores every expert with a **sigmoid** of ``router_logits`` (no softmax), chooses each
    token's experts with those scores plus a learned ``e_score_correction_bias``, only among
    the ``topk_group`` best of ``n_group`` groups of experts (a group's score is the sum of
    its two best), then weighs the chosen experts by their sigmoids *without* the bias,
    renormalized to sum to 1 (``norm_topk_prob``) and times ``routed_scaling_factor``:
    ``expert_weights`` are no probabilities and sum to that factor. The chosen experts come
    in no particular order. The shared experts (``shared_experts``) run on every token
    after them, and the block adds both.
    """

    expert_weights = value(
        lambda mlp: f"{_router(mlp).path}.output", layout="tokens",
        description="each chosen expert's sigmoid score, renormalized and times routed_scaling_factor, [tokens, top_k]",
    )(_routing(1)[0]).writes(_routing(1)[1])
    expert_indices = value(
        lambda mlp: f"{_router(mlp).path}.output", layout="tokens",
        description="the experts each token is routed to, [tokens, top_k], in no order (sigmoid plus "
                    "e_score_correction_bias, within the best groups)",
    )(_routing(2)[0]).writes(_routing(2)[1])
    shared_expert_output = value(
        lambda mlp: f"{getattr(mlp, mlp.shared_expert_module).path}.output", layout="tokens",
        description="the shared experts' output, [tokens, hidden]",
    )(_tokens).writes(lambda mlp, raw, new: new.reshape(raw.shape))

    @property
    def routed_scaling_factor(self) -> float:
        """What the renormalized routing weights are multiplied by."""
        return float(self._module.get_submodule(self.router_module).routed_scaling_factor)

    @property
    def n_group(self) -> int:
        """The groups the experts are cut into for routing."""
        return int(self._module.get_submodule(self.router_module).num_group)

    @property
    def topk_group(self) -> int:
        """The groups each token's experts are chosen among."""
        return int(self._module.get_submodule(self.router_module).topk_group)

    def route(self, logits: Any) -> tuple[Any, Any]:
        """``(expert_weights, expert_indices)`` as this router computes them from
        ``logits`` (``router_logits``, ``[tokens, experts]``), the indices sorted per token
        (the router's own come in no order): what a write to ``router_logits`` routes by."""
        import torch

        router = self._module.get_submodule(self.router_module)
        scores = logits.float().sigmoid()
        choice = (scores + router.e_score_correction_bias.float()).view(len(scores), self.n_group, -1)
        best = choice.topk(2, dim=-1).values.sum(-1).topk(self.topk_group, dim=-1).indices
        allowed = torch.zeros_like(choice[..., 0]).scatter(1, best, 1).bool()
        indices = choice.masked_fill(~allowed[..., None], float("-inf")).view(len(scores), -1)
        indices = indices.topk(self.top_k, dim=-1).indices.sort(-1).values
        weights = scores.gather(1, indices)
        if router.norm_topk_prob:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return weights * self.routed_scaling_factor, indices


class VisionMoeMlp(MoeMlp, VisionMlp):
    """A tower block's sparse MLP (dots3.note's): `MoeMlp`'s values over the tower's patches,
    which are its tokens (``[patches, ...]`` where the tower packs every image in one row);
    ``mlp_output`` is served over patches, as `VisionMlp`'s. No shared expert."""

    shared_expert_module = None
