"""Conformance for hybrid families whose Mamba-2 blocks mix tokens with a decaying state
(`Mamba`)."""

from __future__ import annotations

from typing import Any

import torch

from ...core.envoys.mamba import Mamba


def ssd_scan(values, keys, queries, time_steps, decays, skip):
    """The Mamba-2 recurrence, one token at a time, in float64, from the served values and
    the mixer's ``D`` (``skip``, per head): the state decays by ``exp(decay)`` and takes
    ``dt * x B^T``; a token's output is the state read with ``C``, plus ``D * x``. Returns
    the outputs ``[batch, seq, heads, head_dim]`` and the final state."""
    x, b, c, dt, decay = (t.double() for t in (values, keys, queries, time_steps, decays))
    repeat = x.shape[2] // b.shape[2]
    b, c = b.repeat_interleave(repeat, dim=2), c.repeat_interleave(repeat, dim=2)
    batch, seq, heads, width = x.shape
    state = torch.zeros(batch, heads, width, b.shape[-1], dtype=torch.float64)
    outputs = torch.zeros_like(x)
    for t in range(seq):
        state = state * decay[:, t].exp()[..., None, None] + dt[:, t, :, None, None] * x[:, t, :, :, None] * b[:, t, :, None, :]
        outputs[:, t] = torch.einsum("bhpn,bhn->bhp", state, c[:, t]) + skip.double()[:, None] * x[:, t]
    return outputs, state


class MambaConformance:
    """Mix in before `TextConformance` or `VisionConformance` for a family with Mamba-2
    blocks."""

    def mamba_blocks(self, model: Any) -> list:
        blocks = [block for block in model.layers if "mamba" in block.__dict__]
        assert blocks, "no block has a mamba: map the family's Mamba-2 mixer class onto Mamba"
        return blocks

    def test_support_names_the_mamba_blocks(self, model):
        blocks = [block.block_index for block in self.mamba_blocks(model)]
        rows = [row for row in model.support() if row.endswith("mamba.attention_output")]
        assert len(rows) == 1
        spans = rows[0].split(".")[1].split(",") if rows[0] != "mamba.attention_output" else None
        listed = None if spans is None else [
            i for span in spans for i in range(int(span.split("-")[0]), int(span.split("-")[-1]) + 1)
        ]
        assert listed == (blocks if len(blocks) < model.num_layers else None), rows[0]

    def test_sizes_of_a_mamba_mixer(self, model):
        for block in self.mamba_blocks(model):
            mixer = block.mamba
            assert isinstance(mixer, Mamba)
            inner = mixer.num_heads * mixer.head_dim
            assert mixer.num_heads % mixer.num_groups == 0
            assert mixer.conv_dim == inner + 2 * mixer.num_groups * mixer.state_size
            assert mixer.in_proj.weight.shape[0] == inner + mixer.conv_dim + mixer.num_heads
            assert mixer.out_proj.weight.shape[1] == inner

    def test_the_scan_on_the_served_values_gives_the_served_outputs_and_state(self, model):
        """Where the release runs the scan inside one function nnsight cannot open
        (`Mamba.one_call`), the steps, decays and state are refused, naming it, and the
        rest is checked: the convolution's output is x, B and C side by side."""
        inside = ("time_steps", "decays", "state_output")
        one_call = self.mamba_blocks(model)[0].mamba.one_call
        names = ("conv_output", "attention_values", "attention_keys", "attention_queries", "time_steps", "decays",
                 "attention_head_outputs", "state_output")  # in forward order
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            for block in self.mamba_blocks(model):
                rows.append([None if one_call and name in inside else getattr(block.mamba, name).save()
                             for name in names])
        for block, (conv, x, b, c, steps, decays, heads, state) in zip(self.mamba_blocks(model), rows):
            mixer = block.mamba
            batch, seq = x.shape[:2]
            assert x.shape == heads.shape == (batch, seq, mixer.num_heads, mixer.head_dim)
            assert b.shape == c.shape == (batch, seq, mixer.num_groups, mixer.state_size)
            assert conv.shape == (batch, seq, mixer.conv_dim)
            assert torch.equal(conv, torch.cat([x.flatten(2), b.flatten(2), c.flatten(2)], -1))
            if one_call:
                for name in inside:
                    assert "mamba2_scan_forward" in mixer.why_unavailable(name), name
                continue
            assert steps.shape == decays.shape == (batch, seq, mixer.num_heads)
            module = mixer._module
            assert (steps > 0).all()
            torch.testing.assert_close(decays, steps * -module.A_log.detach().float().exp())  # dt * A
            expected, final = ssd_scan(x, b, c, steps, decays, module.D.detach())
            tolerance = {"atol": 1e-4, "rtol": 1e-3} if heads.dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
            torch.testing.assert_close(heads.double(), expected, **tolerance)
            torch.testing.assert_close(state.double(), final, **tolerance)

    def test_the_gated_head_outputs_projected_are_the_mixer_output(self, model):
        """``out_proj(norm(attention_head_outputs, gates)) == attention_output``: the gates and
        head outputs are what the rest of the mixer computes from."""
        rows = []  # made outside the trace: names first bound inside one do not leave it
        with model.trace(self.text_prompt(model)):
            for block in self.mamba_blocks(model):
                mixer = block.mamba
                rows.append((mixer.attention_head_outputs.save(), mixer.gates.save(), mixer.attention_output.save()))
        for block, (heads, gates, output) in zip(self.mamba_blocks(model), rows):
            module = block.mamba._module
            gated = module.norm(heads.flatten(2), gates)
            torch.testing.assert_close(module.out_proj(gated.to(output.dtype)), output)
