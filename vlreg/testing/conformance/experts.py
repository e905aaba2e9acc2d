"""Conformance for families whose MLPs route tokens to experts (`MoeMlp`)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ...core.envoys.experts import GroupRoutedMoe, MoeMlp


class ExpertsConformance:
    """Mix in before `TextConformance` or `VisionConformance` for a family with sparse
    MLPs. Also set ``renormalized``: whether the routing weights are the top-k softmax
    probabilities renormalized to sum to 1 (Qwen's routers), and ``down_proj_transposed``:
    whether the experts hold each down projection as ``[intermediate, hidden]`` (Llama 4's)
    rather than ``[hidden, intermediate]``."""

    renormalized: ClassVar[bool] = True
    down_proj_transposed: ClassVar[bool] = False

    def sparse_blocks(self, model: Any) -> list:
        blocks = [block for block in model.layers if isinstance(block.__dict__.get("mlp"), MoeMlp)]
        assert blocks, "no block's mlp is a MoeMlp: map the family's sparse MLP class onto it"
        return blocks

    def test_expert_sizes_agree_with_the_weights(self, model):
        for block in self.sparse_blocks(model):
            mlp = block.mlp
            experts = getattr(mlp, mlp.experts_module)
            widths = (mlp.intermediate_size, mlp.expert_hidden_size)
            widths = widths if self.down_proj_transposed else widths[::-1]
            assert tuple(experts.down_proj.shape) == (mlp.num_experts, *widths)
            assert 0 < mlp.top_k <= mlp.num_experts

    def test_routing_and_expert_outputs_sum_to_the_mlp_output(self, model):
        """router_logits -> top-k weights and indices -> weighted slot outputs, whose sum
        over slots is the routed output, exactly (where the family serves the slots)."""
        rows = []  # made outside the trace: names first bound inside one do not leave it
        args, kwargs = self.order_input(model)
        with model.trace(*args, **kwargs):
            for block in self.sparse_blocks(model):
                mlp = block.mlp
                routing = [mlp.router_logits.save(), mlp.expert_weights.save(), mlp.expert_indices.save()]
                slots = mlp.expert_outputs.save() if mlp.why_unavailable("expert_outputs") is None else None
                rows.append((*routing, slots, mlp.routed_output.save()))
        for block, (logits, weights, indices, slots, routed) in zip(self.sparse_blocks(model), rows):
            mlp = block.mlp
            tokens = logits.shape[0]
            assert logits.shape == (tokens, mlp.num_experts)
            assert weights.shape == indices.shape == (tokens, mlp.top_k)
            assert routed.shape == (tokens, mlp.expert_hidden_size)
            if slots is not None:
                assert slots.shape == (tokens, mlp.top_k, mlp.expert_hidden_size)
                assert torch.equal(slots.sum(1).to(routed.dtype), routed)
            if isinstance(mlp, GroupRoutedMoe):  # DeepSeek's sigmoid group routing, its slots in no order
                expected, chosen = mlp.route(logits)
                order = indices.argsort(-1)
                assert torch.equal(indices.gather(1, order), chosen)
                torch.testing.assert_close(weights.gather(1, order).float(), expected)
                continue
            top = logits.float().softmax(-1).topk(mlp.top_k, dim=-1)
            assert torch.equal(top.indices, indices)
            if self.renormalized:
                torch.testing.assert_close((top.values / top.values.sum(-1, keepdim=True)).to(weights.dtype), weights)

    def test_a_write_to_the_router_logits_reroutes(self, model):
        mlp = self.sparse_blocks(model)[0].mlp
        args, kwargs = self.order_input(model)
        with model.trace(*args, **kwargs):
            logits = mlp.router_logits
            chosen = torch.full_like(logits, -1e4)
            chosen[:, : mlp.top_k] = 0  # every token to the first top_k experts
            mlp.router_logits = chosen
            indices = mlp.expert_indices.save()
        assert indices.sort(-1).values.eq(torch.arange(mlp.top_k)).all()
