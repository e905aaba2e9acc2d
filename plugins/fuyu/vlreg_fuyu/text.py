"""Persimmon's text blocks (``persimmon``), onto vlreg's standard envoys.

The block's names are already the standard ones (``input_layernorm``, ``self_attn``,
``post_attention_layernorm``, ``mlp``), and its attention calls transformers' attention
interface as vlreg's `Attention` reads it; what differs is the attention's output
projection, ``dense`` (mounted as ``o_proj``), and the MLP's widening projection,
``dense_h_to_4h``, where vlreg reads the MLP's hidden width.
"""

from __future__ import annotations


from vlreg.plugin import Attention, Layer, Mlp, modeling_envoys


#: Names inside a Persimmon block, from the block: the attention's output projection.
RENAME = {"self_attn.dense": "self_attn.o_proj"}


class PersimmonMlp(Mlp):
    """Persimmon's MLP: ``dense_h_to_4h``, an activation, ``dense_4h_to_h``."""

    _widening = ("dense_h_to_4h",)


envoys = modeling_envoys("persimmon", {"PersimmonDecoderLayer": Layer, "PersimmonAttention": Attention,
                                       "PersimmonMLP": PersimmonMlp})
