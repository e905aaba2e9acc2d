"""DeepSeek-OCR 2's text blocks (``deepseek_ocr2_text``): DeepSeek-V2's block with Llama's
attention (no latent), a dense MLP or DeepSeek-V2's experts (`GreedyRoutedMoe`)."""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, GroupRoutedMoe, Layer, Mlp, modeling_envoys


class GreedyRoutedMoe(GroupRoutedMoe):
    """DeepSeek-V2's experts (``DeepseekV2Moe``): the router scores every expert with a
    **softmax** of ``router_logits``, keeps each token's ``top_k`` best (``topk_method``
    ``"greedy"``; ``"group_limited_greedy"`` first keeps the ``topk_group`` groups whose best
    expert scores highest), and weighs them by those probabilities, not renormalized, times
    ``routed_scaling_factor``; the shared experts run on every token after them."""

    @property
    def n_group(self) -> int:
        """The groups the experts are cut into for routing (1 under greedy routing)."""
        return int(self._module.get_submodule(self.router_module).num_group or 1)

    @property
    def topk_group(self) -> int:
        """The groups each token's experts are chosen among (1 under greedy routing)."""
        return int(self._module.get_submodule(self.router_module).topk_group or 1)

    def route(self, logits: Any) -> tuple[Any, Any]:
        """``(expert_weights, expert_indices)`` as this router computes them from ``logits``,
        the indices sorted per token."""
        import torch

        router = self._module.get_submodule(self.router_module)
        scores = logits.float().softmax(-1)
        choice = scores
        if router.topk_method == "group_limited_greedy":
            grouped = scores.view(len(scores), self.n_group, -1)
            best = grouped.amax(-1).topk(self.topk_group, dim=-1).indices
            allowed = torch.zeros_like(grouped[..., 0]).scatter(1, best, 1).bool()
            choice = grouped.masked_fill(~allowed[..., None], 0.0).view(len(scores), -1)
        indices = choice.topk(self.top_k, dim=-1).indices.sort(-1).values
        return scores.gather(1, indices) * router.routed_scaling_factor, indices


envoys = modeling_envoys("deepseek_ocr2", {
    "DeepseekOcr2TextDecoderLayer": Layer, "DeepseekOcr2TextAttention": Attention, "DeepseekOcr2TextMLP": Mlp,
    "DeepseekOcr2TextMoe": GreedyRoutedMoe})


#: Unlimited-OCR's text blocks: DeepSeek-OCR 2's, renamed.
unlimited_envoys = modeling_envoys("unlimited_ocr", {
    "UnlimitedOcrTextDecoderLayer": Layer, "UnlimitedOcrTextAttention": Attention, "UnlimitedOcrTextMLP": Mlp,
    "UnlimitedOcrTextMoe": GreedyRoutedMoe})
