"""Granite-Docling's text blocks (``GraniteDoclingTextDecoderLayer``, Granite's): each sublayer's
output is added to the stream times ``residual_multiplier`` (`ScaledResidualLayer`), and after
block ``k`` the text model adds DeepStack feature ``k`` at the image tokens, from one call site
in its loop, as Qwen3-VL's does: the adapter ``"deepstack_layer"`` (vlreg-qwen3-vl) reads it
there as ``deepstack_output``, so ``layers[k + 1].input[mask] == layers[k].layer_output[mask] +
layers[k].deepstack_output`` beside the block's own identity.

Granite 4 Vision's blocks (`Granite4Layer`) are Granite's too; its text model adds a set of
image features at the image tokens *before* each mapped block, from one call site in its loop
(the output of ``deepstack_features[layer_idx].to(...)``, call ``k`` the ``k``-th mapped
block's): ``deepstack_input``, so ``layers[k].input[mask] == layers[k - 1].layer_output[mask] +
layers[k].deepstack_input`` (`vlreg_granite.wrappers`)."""

from __future__ import annotations

from typing import Any

from vlreg.plugin import IMAGES, At, Attention, Mlp, ScaledResidualLayer, adapter, returned

from .wrappers import injected_blocks


class GraniteDoclingLayer(adapter("deepstack_layer"), ScaledResidualLayer):
    """A Granite block whose output DeepStack adds a tap to."""


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.granite_docling import modeling_granite_docling as docling

    return {docling.GraniteDoclingTextDecoderLayer: GraniteDoclingLayer, docling.GraniteDoclingTextAttention: Attention,
            docling.GraniteDoclingTextMLP: Mlp}


def _g4_text_model(layer: Any) -> Any:
    return layer.parent.parent


def _mapped(layer: Any) -> list[int]:
    return injected_blocks(layer.root._module.config)
def _no_injection(layer: Any) -> str | None:
    blocks = _mapped(layer)
    if layer.block_index in blocks:
        return None
    return f"Granite 4 Vision adds image features before text blocks {blocks} only (deepstack_layer_map, " \
           f"spatial_target_layers)"


class Granite4Layer(ScaledResidualLayer):
    """A Granite block, and the image features the text model adds before it."""

    order = ("deepstack_input", *ScaledResidualLayer.order)
    refuses = {"deepstack_input": (_no_injection, IMAGES)}

    deepstack_input = returned(
        At(lambda layer: f"{_g4_text_model(layer).path}.source.deepstack_features_to_0.output",
           inside=_g4_text_model, occurrence=lambda layer: _mapped(layer).index(layer.block_index)),
        layout="image_tokens",
        description="what the text model adds to the stream at the image tokens before this block, "
                    "[image_tokens, hidden]",
    )


def granite4_envoys(part: Any) -> dict[type, type]:
    from transformers.models.granite4_vision import modeling_granite4_vision as granite4

    return {granite4.Granite4VisionTextDecoderLayer: Granite4Layer, granite4.Granite4VisionTextAttention: Attention,
            granite4.Granite4VisionTextMLP: Mlp}
