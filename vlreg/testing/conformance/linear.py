"""Conformance for hybrid families whose linear blocks mix tokens with a recurrent state
(`LinearAttention`)."""

from __future__ import annotations

from typing import Any

import torch

from ...core.envoys.linear import LinearAttention


def delta_rule(queries, keys, values, betas, decays):
    """The gated delta rule, one token at a time, in float64: the state decays by
    ``exp(decay)`` (one per head, or one per head and key channel: Kimi's delta attention),
    then each token writes ``beta * (value - state^T key)`` along its key; a token's output is the state read with its query. Queries and keys are L2-normed and
    queries scaled by ``key_head_dim ** -0.5`` first, as the models' rule does. Returns the
    outputs ``[batch, seq, value_heads, value_head_dim]`` and the final state."""
    q, k, v, beta, g = (t.double() for t in (queries, keys, values, betas, decays))
    repeat = v.shape[2] // k.shape[2]
    if g.dim() == 3:  # a decay per head: every key channel alike
        g = g[..., None].expand(*g.shape, k.shape[-1])
    q = torch.nn.functional.normalize(q, dim=-1).repeat_interleave(repeat, dim=2) * q.shape[-1] ** -0.5
    k = torch.nn.functional.normalize(k, dim=-1).repeat_interleave(repeat, dim=2)
    batch, seq, heads, width = v.shape
    state = torch.zeros(batch, heads, k.shape[-1], width, dtype=torch.float64)
    outputs = torch.zeros(batch, seq, heads, width, dtype=torch.float64)
    for t in range(seq):
        state = state * g[:, t].exp()[..., None]
        read = torch.einsum("bhkv,bhk->bhv", state, k[:, t])
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, t], (v[:, t] - read) * beta[:, t, :, None])
        outputs[:, t] = torch.einsum("bhkv,bhk->bhv", state, q[:, t])
    return outputs, state


class LinearAttentionConformance:
    """Mix in before `TextConformance` or `VisionConformance` for a hybrid family."""

    def linear_blocks(self, model: Any) -> list:
        blocks = [block for block in model.layers if "linear_attn" in block.__dict__]
        assert blocks, "no block has a linear_attn: map the family's linear mixer class onto LinearAttention"
        return blocks

    def test_support_names_the_blocks_of_each_kind(self, model):
        linear = [block.block_index for block in self.linear_blocks(model)]
        full = [block.block_index for block in model.layers if block.block_index not in linear]
        rows = model.support()
        for name, blocks in (("linear_attn.attention_output", linear), ("self_attn.attention_output", full)):
            (row,) = [row for row in rows if row.endswith(name) and not row.startswith("vision")]
            listed = row.split(".")[1].split(",") if row != name else None
            expanded = None if listed is None else [
                i for part in listed for i in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)
            ]
            assert expanded == (blocks if len(blocks) < model.num_layers else None), row

    def test_sizes_of_a_linear_mixer(self, model):
        for block in self.linear_blocks(model):
            mixer = block.linear_attn
            assert isinstance(mixer, LinearAttention)
            assert mixer.num_value_heads % mixer.num_key_heads == 0
            projection = getattr(mixer, "out_proj", None) or mixer.o_proj
            assert projection.weight.shape[1] == mixer.num_value_heads * mixer.value_head_dim

    def test_the_delta_rule_on_the_served_values_gives_the_served_outputs_and_state(self, model):
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            for block in self.linear_blocks(model):
                mixer = block.linear_attn
                rows.append([getattr(mixer, name).save() for name in (
                    "attention_queries", "attention_keys", "attention_values", "betas", "decays",
                    "attention_head_outputs", "state_output")])
        for block, (q, k, v, beta, g, heads, state) in zip(self.linear_blocks(model), rows):
            mixer = block.linear_attn
            batch, seq = q.shape[:2]
            assert q.shape == k.shape == (batch, seq, mixer.num_key_heads, mixer.key_head_dim)
            assert v.shape == heads.shape == (batch, seq, mixer.num_value_heads, mixer.value_head_dim)
            assert beta.shape == (batch, seq, mixer.num_value_heads)
            assert g.shape in ((batch, seq, mixer.num_value_heads), (batch, seq, mixer.num_value_heads, mixer.key_head_dim))
            expected, final = delta_rule(q, k, v, beta, g)
            tolerance = {"atol": 1e-4, "rtol": 1e-3} if heads.dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
            torch.testing.assert_close(heads.double(), expected, **tolerance)
            torch.testing.assert_close(state.double(), final, **tolerance)
