"""`ModalityExpertsConformance`: the suite's checks of a family whose MLPs send each token to
one of two banks of experts by modality (`vlreg.plugin.ModalityExperts`)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from ...core.envoys.modality import ModalityExperts
from ...core.errors import Unavailable
from .helpers import refused_before_running


class ModalityExpertsConformance:
    """Mix in before `VisionConformance`. ``marks_input`` is the processor's output marking
    the tokens for the vision bank."""

    marks_input: ClassVar[str] = "moe_mm_token_type_ids"

    def modality_blocks(self, model: Any) -> list:
        blocks = [block for block in model.layers if isinstance(block.__dict__.get("mlp"), ModalityExperts)]
        assert blocks, "no block's mlp is a ModalityExperts: map the family's MLP of two banks onto it"
        return blocks

    def test_the_mask_is_the_processors_marks_and_covers_the_image(self, model):
        prompt, images = self.image_prompt(model), self.images()[:1]
        marks = model.processor(text=[prompt], images=images, return_tensors="pt")[self.marks_input].bool()
        rows = []
        with model.trace(prompt, images=images):
            image_tokens = model.vision.image_token_mask.save()
            for block in self.modality_blocks(model):
                rows.append(block.mlp.modality_mask.save())
        for mask in rows:
            assert mask.dtype == torch.bool and torch.equal(mask, marks)
            assert mask[image_tokens].all() and (~mask).any()

    def test_each_bank_takes_its_tokens_and_the_block_adds_their_outputs(self, model):
        """``mlp_output`` is the text bank's routed output at the unmarked tokens, the vision
        bank's at the marked ones, plus the shared experts' output everywhere, exactly; each
        bank's routing is the top-k of its router's softmax, renormalized."""
        rows = []
        with model.trace(self.image_prompt(model), images=self.images()[:1]):
            for block in self.modality_blocks(model):
                mlp = block.mlp
                found = [mlp.modality_mask.save(), mlp.shared_expert_output.save()]
                for bank in (mlp.text_experts, mlp.vision_experts):
                    found += [bank.router_logits.save(), bank.expert_weights.save(), bank.expert_indices.save(),
                              bank.routed_output.save()]
                rows.append((*found, mlp.mlp_output.save()))
        for block, (mask, shared, *banks, out) in zip(self.modality_blocks(model), rows):
            rebuilt = torch.zeros_like(out)
            for (logits, weights, indices, routed), taken, bank in zip(
                    (banks[:4], banks[4:]), (~mask, mask), (block.mlp.text_experts, block.mlp.vision_experts)):
                assert logits.shape == (int(taken.sum()), bank.num_experts) and routed.shape[0] == logits.shape[0]
                top = logits.float().softmax(-1).topk(bank.top_k, dim=-1)
                assert torch.equal(top.indices, indices)
                torch.testing.assert_close((top.values / top.values.sum(-1, keepdim=True)).to(weights.dtype), weights)
                rebuilt[taken] = routed.to(out.dtype)
            assert torch.equal(rebuilt + shared, out)

    def test_a_write_to_the_vision_banks_router_reroutes_the_image_only(self, model):
        block = self.modality_blocks(model)[0]
        args, kwargs = (self.image_prompt(model),), {"images": self.images()[:1]}
        with model.trace(*args, **kwargs):
            text = block.mlp.text_experts.expert_indices.save()
            logits = block.mlp.vision_experts.router_logits
            chosen = torch.full_like(logits, -1e4)
            chosen[:, : block.mlp.vision_experts.top_k] = 0
            block.mlp.vision_experts.router_logits = chosen
            indices = block.mlp.vision_experts.expert_indices.save()
            edited = model.logits.save()
        with model.trace(*args, **kwargs):
            kept = block.mlp.text_experts.expert_indices.save()
            plain = model.logits.save()
        assert indices.sort(-1).values.eq(torch.arange(block.mlp.vision_experts.top_k)).all()
        assert torch.equal(text, kept) and not torch.equal(edited, plain)

    def test_without_an_image_every_token_goes_to_the_text_bank(self, model):
        block = self.modality_blocks(model)[0]
        prompt = self.text_prompt(model)
        with model.trace(prompt):
            mask = block.mlp.modality_mask.save()
            logits = block.mlp.text_experts.router_logits.save()
            out = block.mlp.mlp_output.save()
        assert not mask.any() and logits.shape[0] == mask.numel() == out.shape[0] * out.shape[1]
        with refused_before_running(model, "no token of this run is marked for the vision bank"):
            with model.trace(prompt):
                block.mlp.vision_experts.router_logits.save()

    def test_a_banks_tokens_are_refused_across_several_invokes(self, model):
        block = self.modality_blocks(model)[0]
        with pytest.raises(Unavailable, match="read it in a trace of one invoke"):
            with model.trace() as tracer:
                with tracer.invoke(self.image_prompt(model), images=self.images()[:1]):
                    block.mlp.modality_mask.save()
                    block.mlp.text_experts.router_logits.save()
                with tracer.invoke(self.text_prompt(model)):
                    pass
