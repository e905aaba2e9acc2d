"""The BLIP-2 / InstructBLIP / InstructBLIP-Video tower and the Q-Former, as vision parts.

The tower (``Blip2VisionModel``, ``InstructBlipVisionModel``, ``InstructBlipVideoVisionModel``,
which runs on every frame of a clip, `BlipClipVision`) is a ViT with a class token:
``embeddings.patch_embedding`` (a convolution), ``encoder.layers`` of pre-norm blocks
(``layer_norm1``, ``self_attn`` with one fused ``qkv`` and its output ``projection``,
``layer_norm2``, ``mlp``) and ``post_layernorm``, which norms every row: ``tower_output``
(the output's ``last_hidden_state``) is after it, and is what the Q-Former reads, the class
token's row first (`BlipVision.class_tokens`).

The Q-Former (`QFormer`) is served at ``model.vision.qformer``, mounted there by the
wrapper's `QueryTokens` from its place at the root: its blocks at
``model.vision.qformer.layers[i]`` (`QFormerLayer`) and ``query_output``, its stream at the
queries after the last block, what the projector reads. A Q-Former block is BERT's: its
self-attention over the queries (and, on InstructBLIP, the instruction's tokens after them),
then on every ``cross_attention_frequency``-th block a cross-attention from the queries to
the tower's rows, then a feed-forward (a separate one for the queries and for the
instruction), each sublayer followed by its residual add and a LayerNorm (post-norm). Its
sublayers are not served under standard names (read them natively:
``layers[i].attention``, ``.crossattention``, ``.intermediate_query``/``.output_query``;
nnsight mounts each BERT sublayer's ``output`` submodule as ``E_output``);
a block's ``input``, ``output`` and ``layer_output`` are, ``[images, queries (+ instruction
tokens), qformer_hidden_size]``.

Every key is relative to the tower, and none is a name a text block has: ``layer_norm1``
and ``layer_norm2`` are the tower blocks' alone (OPT's are ``self_attn_layer_norm`` and
``final_layer_norm``, Llama's ``input_layernorm``, the Q-Former's ``LayerNorm``).
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import Any

import torch

from vlreg.plugin import Layer, Standard, Vision, VisionAttention, VisionLayer, VisionMlp, value

# Every Q-Former block's BERT sublayers hold a submodule named ``output``, which nnsight mounts
# as ``E_output`` (``output`` is the module's output) with a warning per module on each load;
# that is said here once instead.
warnings.filterwarnings("ignore",
                        message=r"Module 'model\.qformer\.encoder\.layer\.\d+(\.\w+)?' has a submodule named 'output'")

RENAME = {
    "embeddings.patch_embedding": "patch_embed",
    "encoder.layers": "layers",
    "post_layernorm": "norm",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
}


class BlipVision(Vision):
    """The BLIP tower, and the Q-Former after it (``qformer``).

    The processor writes each image's ``num_query_tokens`` placeholders itself, before the
    prompt's text (`Vision.writes_placeholders`): a prompt holds none and takes one image."""

    standard_children = {"layers": "", "qformer": "qformer."}
    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "qformer", "image_features")
    class_tokens = 1
    writes_placeholders = True


class BlipClipVision(BlipVision):
    """InstructBLIP-Video's tower: a prompt's images are one clip's frames, each run through
    the tower and the Q-Former as an image (`Vision.clips`)."""

    clips = True


def _queries(qformer: Any) -> int:
    return qformer.root._module.config.num_query_tokens


def _query_rows(qformer: Any, raw: Any) -> torch.Tensor:
    return raw.last_hidden_state[:, : _queries(qformer)]


def _put_query_rows(qformer: Any, raw: Any, new: torch.Tensor) -> Any:
    stream = raw.last_hidden_state
    raw["last_hidden_state"] = torch.cat([new.reshape(_query_rows(qformer, raw).shape), stream[:, _queries(qformer):]], 1)
    return raw


class QFormer(Standard):
    """The Q-Former: learned queries that cross-attend to the tower's rows.

    ``num_query_tokens`` queries run through ``num_layers`` blocks; on InstructBLIP the
    instruction's tokens follow the queries in the Q-Former's sequence (they attend with the
    queries but never to the tower). ``query_output`` is the stream at the queries after the
    last block, ``[images, queries, qformer_hidden_size]``: the projector maps it to the text
    model's width, and the wrapper scatters that at the image tokens."""

    standard_children = {"layers": ""}
    order = ("layers", "query_output")

    query_output = value(
        "output", description="[images, queries, qformer_hidden_size]: the stream at the queries after the last block, "
        "what the projector reads",
    )(_query_rows).writes(_put_query_rows)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_query_tokens(self) -> int:
        """The learned queries: each image's image tokens in the prompt."""
        return _queries(self)

    @property
    def qformer_hidden_size(self) -> int:
        return self._module.config.hidden_size

    @property
    def cross_attention_layers(self) -> list[int]:
        """The blocks whose queries cross-attend to the tower's rows."""
        return [index for index, block in enumerate(self.layers) if block._module.has_cross_attention]


class QFormerLayer(Layer):
    """A Q-Former block (post-norm, BERT's): its sublayers are read natively (see the module)."""

    standard_children: dict = {}
    order = ("input", "output", "layer_output")


#: model_type prefix -> (transformers module, class-name prefix), the longest prefix first
MODELING = {"blip_2": ("blip_2", "Blip2"), "instructblipvideo": ("instructblipvideo", "InstructBlipVideo"),
            "instructblip": ("instructblip", "InstructBlip")}


def _modeling(part: Any) -> tuple[Any, str]:
    """The part's modeling module and class prefix, by its ``model_type``."""
    module, prefix = next(found for start, found in MODELING.items() if part.model_type.startswith(start))
    return import_module(f"transformers.models.{module}.modeling_{module}"), prefix


def envoys(part: Any) -> dict[type, type]:
    """The tower's module classes."""
    m, prefix = _modeling(part)
    return {
        getattr(m, f"{prefix}VisionModel"): BlipClipVision if prefix == "InstructBlipVideo" else BlipVision,
        getattr(m, f"{prefix}EncoderLayer"): VisionLayer,
        getattr(m, f"{prefix}Attention"): VisionAttention,
        getattr(m, f"{prefix}MLP"): VisionMlp,
    }


def qformer_envoys(part: Any) -> dict[type, type]:
    """The Q-Former's module classes (its config is the wrapper's ``qformer_config``, a part
    of its own)."""
    m, prefix = _modeling(part)
    return {getattr(m, f"{prefix}QFormerModel"): QFormer, getattr(m, f"{prefix}QFormerLayer"): QFormerLayer}
