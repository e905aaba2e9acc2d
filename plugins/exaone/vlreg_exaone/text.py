"""EXAONE 4's text blocks (``Exaone4DecoderLayer``): no norm before a sublayer, one after
each, so what the attention and the MLP add to the stream is read at ``post_attention_layernorm``
and ``post_feedforward_layernorm`` (the adapter ``"sandwich"``), and ``input + attention_output
+ mlp_output == layer_output``."""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Layer, adapter


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.exaone4 import modeling_exaone4 as exaone4

    sandwich = adapter("sandwich")
    return {exaone4.Exaone4DecoderLayer: Layer, exaone4.Exaone4Attention: sandwich["attention"],
            exaone4.Exaone4MLP: sandwich["mlp"]}
