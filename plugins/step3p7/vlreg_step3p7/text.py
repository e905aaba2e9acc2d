"""Step 3.7's text model (``step3p5``) under the standard names.

Its blocks are pre-norm (Gemma's RMS norm), changed in three ways a reader must know:

* **Heads differ by block** (``per_layer_config``: sliding-window blocks may have other head
  counts); the root's ``num_heads`` is then unavailable, each block's attention says its own.
* **A sigmoid gate per head** (``g_proj``) multiplies each head's output before ``o_proj``:
  ``attention_head_outputs`` is read where ``o_proj`` receives them, after the gate
  (vlreg-qwen3-vl's `GatedAttention`); the ungated outputs are the attention function's.
* **MiniMax-M3's experts** (vlreg-minimax-m3-vl's `SigmoidRoutedMoe`): shared experts first, a
  sigmoid router with a correction bias, the routed sum times ``routed_scaling_factor``
  (the config's ``moe_router_scaling_factor``); gate and up projections are clamped on the
  blocks ``swiglu_limits`` names. Its experts module has no other implementation than a
  loop over experts, so the weighted slot outputs (``expert_outputs``) are never held at once:
  refused by name (`LoopedExperts`).
"""

from vlreg.plugin import Layer, Mlp, modeling_envoys
from vlreg_minimax_m3_vl.text import SigmoidRoutedMoe
from vlreg_qwen3_vl.text import GatedAttention


class LoopedExperts(SigmoidRoutedMoe):
    """`SigmoidRoutedMoe` whose experts always run as a loop over experts."""

    refuses = {**SigmoidRoutedMoe.refuses,
               "expert_outputs": "Step 3.7's experts module (Step3p7Experts) has no implementation but a loop over "
                                 "experts, which never holds every slot's output at once; read routed_output, their sum"}


envoys = modeling_envoys("step3p7", {
    "Step3p7DecoderLayer": Layer, "Step3p7Attention": GatedAttention, "Step3p7MLP": Mlp,
    "Step3p7SparseMoeBlock": LoopedExperts})
