"""Granite-Docling's tower (``GraniteDoclingVisionModel``): SigLIP's layout
(``embeddings.patch_embedding``, ``encoder.layers`` of ``layer_norm1``, ``self_attn``,
``layer_norm2``, ``mlp``, then ``post_layernorm`` over every patch), its names the ``"siglip"``
adapter's (vlreg-llava). The forward runs the blocks itself (``encode``), not through
``encoder``, which the values read at the blocks do not mind."""

from vlreg.plugin import adapter, tower_envoys

RENAME = adapter("siglip").rename

envoys = tower_envoys("granite_docling", ("GraniteDoclingVisionModel", "GraniteDoclingEncoderLayer",
                                          "GraniteDoclingVisionAttention", "GraniteDoclingVisionMLP"))
