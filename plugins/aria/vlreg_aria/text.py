"""Aria's text model (``aria_text``): Llama-shaped blocks whose MLP is a mixture of experts.

Every block's ``mlp`` is an ``AriaTextMoELayer``: a router (``router``) scores every expert
(``router_logits``), keeps each token's ``moe_topk`` best logits and softmaxes over those
alone, which is the top-k of the softmax renormalized; the experts (``experts``, 3-D
weights, each down projection held as ``[intermediate, hidden]``) run on their tokens, and
shared experts (``shared_experts``, one MLP ``moe_num_shared_experts`` times as wide) run on
every token. The block adds their sum. The attention and norms use the standard names.
"""

from __future__ import annotations

from vlreg.plugin import Attention, Layer, SharedExpertsAfter, modeling_envoys, value

MODEL_TYPES = ("aria_text",)


class AriaMoe(SharedExpertsAfter):
    """``AriaTextMoELayer``: a softmax top-k router, experts, shared experts run after them."""

    router_module = "router"
    router_call = "nn_functional_linear_0"

    shared_expert_output = value(
        lambda mlp: f"{mlp.shared_experts.path}.output", layout="tokens",
        description="the shared experts' output, [tokens, hidden]",
    )(lambda mlp, raw: raw.view(-1, raw.shape[-1])).writes(lambda mlp, raw, new: new.reshape(raw.shape))


envoys = modeling_envoys("aria", {"AriaTextDecoderLayer": Layer, "AriaTextAttention": Attention, "AriaTextMoELayer": AriaMoe})
