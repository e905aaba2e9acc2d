"""Cosmos3 Edge's text blocks (``Cosmos3EdgeTextDecoderLayer``): Llama's pre-norm block with
grouped-query attention under M-RoPE and a two-projection MLP (``fc1``, ``fc2``, no gate),
the standard classes as they are."""

from vlreg.plugin import Attention, Layer, Mlp, modeling_envoys

envoys = modeling_envoys("cosmos3_edge", {"Cosmos3EdgeTextDecoderLayer": Layer, "Cosmos3EdgeTextAttention": Attention,
                                          "Cosmos3EdgeTextMLP": Mlp})
