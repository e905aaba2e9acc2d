"""Florence-2's text model, BART (``bart``), under the standard envoy classes.

BART's encoder blocks are `PostNormLayer`, its decoder blocks `DecoderLayer`
(`vlreg.core.envoys.seq2seq`); both attentions of a decoder block are BART attention, served as
`Attention` (``out_proj`` maps the heads to the output). The MLP is ``fc2`` under
`OutputProjection`, keyed by path so DaViT's own ``fc2`` stays a plain module. The
encoder, mounted by the wrapper as ``encoder``, is an `Encoder`.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, DecoderLayer, Encoder, OutputProjection, PostNormLayer


def rename(part: Any) -> dict[str, str]:
    """Inside the BART blocks: the decoder's ``encoder_attn`` is ``cross_attn``; the MLP,
    written inline, is served at ``fc2`` as ``mlp``. ``fc2`` is keyed from each stack
    (``layers.<i>.fc2``), never alone: DaViT's MLPs have an ``fc2`` too."""
    depth = max(part.config.encoder_layers, part.config.decoder_layers)
    return {"encoder_attn": "cross_attn", **{f"layers.{i}.fc2": f"layers.{i}.mlp" for i in range(depth)}}


def envoys(part: Any) -> dict[type, type]:
    """BART's blocks and attention onto their envoys."""
    from transformers.models.bart import modeling_bart as bart

    return {bart.BartEncoderLayer: PostNormLayer, bart.BartDecoderLayer: DecoderLayer, bart.BartAttention: Attention}


def wrapper_envoys(part: Any) -> dict[Any, type]:
    """What the wrapper mounts of BART: the encoder, and each block's ``fc2`` as its MLP."""
    from transformers.models.bart import modeling_bart as bart

    return {bart.BartEncoder: Encoder, "layers.*.fc2": OutputProjection}
