"""HyperCLOVA X's text blocks (``HyperCLOVAXDecoderLayer``, Granite's with peri-layer norms):
each sublayer's output is normed (``post_norm1``, ``post_norm2``; an identity where the config's
``use_post_norm`` is off) and added to the stream times ``residual_multiplier``, so what the
attention and the MLP add is read at those norms' outputs and the block is a
`ScaledResidualLayer`: ``layer_output == input + m * attention_output + m * mlp_output``."""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Mlp, ScaledResidualLayer, returned


def _after(norm: str):
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class PostNormedAttention(Attention):
    """HyperCLOVA X's attention: what it adds is ``post_norm1`` of its output."""

    attention_output = returned(
        _after("post_norm1"),
        description="what the attention adds to the stream, before the block's residual_multiplier: post_norm1 of "
                    "its output",
    )


class PostNormedMlp(Mlp):
    """HyperCLOVA X's MLP: what it adds is ``post_norm2`` of its output."""

    mlp_output = returned(
        _after("post_norm2"),
        description="what the MLP adds to the stream, before the block's residual_multiplier: post_norm2 of its output",
    )


def envoys(part: Any) -> dict[type, type]:
    from transformers.models.hyperclovax import modeling_hyperclovax as hcx

    return {hcx.HyperCLOVAXDecoderLayer: ScaledResidualLayer, hcx.HyperCLOVAXAttention: PostNormedAttention,
            hcx.HyperCLOVAXMLP: PostNormedMlp}
