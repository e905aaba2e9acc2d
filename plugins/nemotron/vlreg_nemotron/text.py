"""NemotronH's hybrid text model: each block is one sublayer, a norm and a ``mixer``.

``config.layers_block_type`` says what each block's ``mixer`` is: a Mamba-2 mixer
(``linear_attention``), attention (``full_attention``), experts (``moe``) or an MLP
(``mlp``). One native name holds four kinds of module, so the standard name follows the
kind, block by block: ``layers[i].mamba``, ``layers[i].self_attn`` or ``layers[i].mlp``.
A block adds its one sublayer's output to the stream, so ``input + (the mixer's
attention_output or mlp.mlp_output) == layer_output`` on every block.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mamba, Mlp, SharedExpertsAfter, modeling_envoys

#: block type -> the standard name of its mixer
STANDARD = {"linear_attention": "mamba", "full_attention": "self_attn", "moe": "mlp", "mlp": "mlp"}


def rename(part: Any) -> dict[str, str]:
    """Each block's ``mixer`` under its kind's standard name, block by block from the text
    config (keys resolve from the text model, whose ``layers`` they name)."""
    return {f"layers.{i}.mixer": f"layers.{i}.{STANDARD[kind]}" for i, kind in enumerate(part.config.layers_block_type)}


class NemotronMoe(SharedExpertsAfter):
    """NemotronH's experts: a sigmoid router with a score correction (``gate``), experts of
    ``up_proj`` and ``down_proj`` alone, and a shared expert (``shared_experts``) run after
    the routed ones."""


envoys = modeling_envoys("nemotron_h", {"NemotronHBlock": Layer, "NemotronHMamba2Mixer": Mamba,
                                         "NemotronHAttention": Attention, "NemotronHMLP": Mlp, "NemotronHMoE": NemotronMoe})
