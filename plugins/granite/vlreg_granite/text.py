"""Granite-Docling's text blocks (``GraniteDoclingTextDecoderLayer``, Granite's): each sublayer's
output is added to the stream times ``residual_multiplier`` (`ScaledResidualLayer`), and after
block ``k`` the text model adds DeepStack feature ``k`` at the image tokens, from one call site
in its loop, as Qwen3-VL's does: the adapter ``"deepstack_layer"`` (vlreg-qwen3-vl) reads it
there as ``deepstack_output``, so ``layers[k + 1].input[mask] == layers[k].layer_output[mask] +
layers[k].deepstack_output`` beside the block's own identity."""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Mlp, ScaledResidualLayer, adapter


class GraniteDoclingLayer(adapter("deepstack_layer"), ScaledResidualLayer):
    """A Granite block whose output DeepStack adds a tap to."""


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.granite_docling import modeling_granite_docling as docling

    return {docling.GraniteDoclingTextDecoderLayer: GraniteDoclingLayer, docling.GraniteDoclingTextAttention: Attention,
            docling.GraniteDoclingTextMLP: Mlp}
