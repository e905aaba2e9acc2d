"""The attention interior's checks of the conformance suite (a mixin of `TextConformance`):
under eager attention every interior value has its shape and the block's output is its
heads through ``o_proj``; an edit of the pattern lands; without eager each value is refused
saying so."""

from __future__ import annotations

import pytest
import torch

from ...core.errors import Unavailable
from ...core.envoys.seq2seq import MergedAttention
from .helpers import attention_blocks, envoy_at, joined_keys, joined_positions, module_at, text_rows

INTERIOR = (
    "attention_queries",
    "attention_keys",
    "attention_values",
    "attention_scores",
    "attention_probabilities",
    "attention_head_outputs",
)


class AttentionInterior:
    """Needs `TextConformance`'s ``model``/``sdpa_model`` fixtures, ``text_prompt``,
    ``o_proj`` and ``bidirectional_prefix``."""

    def test_attention_interior_under_eager(self, model):
        block = attention_blocks(model)[-1]
        sunk = "attention_sinks" in type(block.self_attn).values()
        sinks, joined = [], []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            joined_keys(model, block, joined)  # a decoder block's attention may weigh the encoder's too
            queries = block.self_attn.attention_queries.save()
            keys = block.self_attn.attention_keys.save()
            values = block.self_attn.attention_values.save()
            scores = block.self_attn.attention_scores.save()
            # a sink logit per query, joined to the scores for the softmax, takes a share of it
            if sunk:
                sinks.append(block.self_attn.attention_sinks.save())
            pattern = block.self_attn.attention_probabilities.save()
            head_outputs = block.self_attn.attention_head_outputs.save()
            # o_proj's own output: what the module returns first, or, where the module norms its
            # residual sum itself (BERT's), what it adds to the stream before
            output = envoy_at(block.self_attn, self.o_proj).output.save()
        output = output[0] if isinstance(output, tuple) else output
        batch, seq = output.shape[:2]
        # the block's own sizes (heads may differ by block; the root's are what the blocks agree on)
        attention = block.self_attn
        heads, kv_heads, head_dim = attention.num_heads, attention.num_kv_heads, attention.head_dim
        # queries and keys are qk_head_dim wide, values head_dim (wider queries and keys: latent attention)
        keyed = seq + joined_positions(joined)  # the block's own positions, then any it joins to them
        assert tuple(queries.shape) == (batch, heads, seq, attention.qk_head_dim)
        assert tuple(keys.shape) == (batch, kv_heads, keyed, attention.qk_head_dim)
        assert tuple(values.shape) == (batch, kv_heads, keyed, head_dim)
        assert tuple(scores.shape) == tuple(pattern.shape) == (batch, heads, seq, keyed)
        mass = torch.ones_like(pattern.sum(-1)) if not sinks else (
            1 - torch.cat([scores, sinks[0]], -1).float().softmax(-1)[..., -1].to(pattern.dtype))
        torch.testing.assert_close(pattern.sum(-1), mass)
        own = pattern[..., :seq]
        if self.bidirectional_prefix:
            assert own.triu(1).abs().max() > 0, "no token of the prefix attends to a later one"
        else:
            assert own.triu(1).abs().max() == 0, "a token attends to a later one"
        if joined:  # the encoder's positions, after the block's own, take a share
            assert MergedAttention.encoder_part(pattern, keyed - seq).sum(-1).min() > 0
        assert tuple(head_outputs.shape) == (batch, seq, heads, head_dim)
        o_proj = module_at(block.self_attn, self.o_proj)
        torch.testing.assert_close(o_proj(head_outputs.reshape(batch, seq, -1)), output)

    def test_editing_the_pattern_changes_the_attention_output(self, model):
        block = attention_blocks(model)[-1]
        prompt = self.text_prompt(model)
        with model.trace(prompt):
            plain = envoy_at(block.self_attn, self.o_proj).output.save()
        with model.trace(prompt):
            block.self_attn.attention_probabilities[:] = 0
            zeroed = envoy_at(block.self_attn, self.o_proj).output.save()
        assert not torch.equal(plain, zeroed)
        bias = getattr(module_at(block.self_attn, self.o_proj), "bias", None)
        expected = torch.zeros_like(zeroed) if bias is None else bias.expand_as(zeroed)
        torch.testing.assert_close(zeroed, expected)

    def test_interior_is_unavailable_without_eager(self, sdpa_model):
        model = sdpa_model
        rows = model.support()
        for name in INTERIOR:
            (row,) = text_rows(rows, f"self_attn.{name}")
            assert "attn_implementation='eager'" in rows[row]
            with pytest.raises(Unavailable, match="attn_implementation='eager'"):
                with model.trace(self.text_prompt(model)):
                    getattr(attention_blocks(model)[0].self_attn, name).save()
