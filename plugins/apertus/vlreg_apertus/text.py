"""Apertus 1.5's text blocks (``apertus1p5_text``, Apertus' own), onto the standard envoys.

A pre-norm block whose norms are named for what they norm: ``attention_layernorm`` before
``self_attn`` (mounted as ``input_layernorm``) and ``feedforward_layernorm`` before ``mlp``
(as ``post_attention_layernorm``), so ``input + attention_output + mlp_output ==
layer_output``. Queries and keys are normed per head (``q_norm``, ``k_norm``) before the
rotary embedding. The MLP has no gate: ``up_proj``, the xIELU activation, ``down_proj``.
"""

from vlreg.plugin import Attention, Layer, Mlp, modeling_envoys

#: Names inside an Apertus block, from the block.
RENAME = {"attention_layernorm": "input_layernorm", "feedforward_layernorm": "post_attention_layernorm"}

envoys = modeling_envoys("apertus1p5", {"Apertus1p5TextDecoderLayer": Layer, "Apertus1p5TextAttention": Attention,
                                        "Apertus1p5TextMLP": Mlp})
