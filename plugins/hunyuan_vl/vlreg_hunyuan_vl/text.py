"""HunYuan-VL's text blocks (``HunYuanVLDenseV1DecoderLayer``): Llama's pre-norm block whose
attention norms queries and keys per head (``query_layernorm``, ``key_layernorm``) under
M-RoPE, a gated MLP; the standard classes as they are (the queries and keys are read where the
attention function takes them)."""

from vlreg.plugin import Attention, Layer, Mlp, modeling_envoys

envoys = modeling_envoys("hunyuan_vl", {"HunYuanVLDenseV1DecoderLayer": Layer, "HunYuanVLDenseV1Attention": Attention,
                                        "HunYuanVLMLP": Mlp})
