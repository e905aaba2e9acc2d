"""Encoder-decoder text models: `Encoder`, `DecoderLayer` and post-norm blocks.

On an encoder-decoder (BART, and Florence-2 over it) the prompt runs through an
encoder once; each decoder block attends to itself (``self_attn``), then to the
encoder's output (``cross_attn``), then runs its MLP. vlreg names them so:

* ``model.layers[i]``: the **decoder** blocks, the stack the logits are read from and
  the one generation steps through (so every text helper, the logit lens among them,
  reads the decoder);
* ``model.encoder``: the encoder, an `Encoder`, whose ``layers[i]`` are its blocks;
  ``encoder.input_embeddings`` is what the encoder is called with (a vision family's
  image features are written in there, at the image tokens: the image enters the
  encoder) and ``encoder.encoder_output`` what every decoder block's ``cross_attn``
  reads as keys and values.

The encoder runs once a generation, before its first step: its values are served at the
first step only, and refused after it (`Place.once`, a gate of `vlreg.core.serving.refusals`),
as the tower's are.

BART's blocks normalize *after* each residual add (post-norm). Their identity is not the
pre-norm sum: with ``post_norms`` naming the norm after each sublayer, in forward order,

    h = input
    for sublayer, norm in zip(sublayers, post_norms):
        h = norm(h + sublayer's output)
    layer_output == h

which `post_norm_output` computes and the conformance suite checks on any block that
declares ``post_norms``.

Every call starts the decoder: where a call passes no decoder input, vlreg passes the token
transformers' generate starts it with (`with_decoder_start`), so a trace's decoder is a
generation's first step (T5Gemma 2's forward, unlike BART's, starts none itself).

T5Gemma 2's decoder blocks have no ``cross_attn``: one attention (`MergedAttention`, at
``self_attn``) weighs the block's own positions and the encoder's output in one softmax.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ..errors import Unavailable
from ..serving.values import value
from .mixers import Mixer
from .standard import Standard
from .text import Attention, Layer, Mlp


def _embeds(raw: Any) -> torch.Tensor:
    args, kwargs = raw
    found = kwargs.get("inputs_embeds")
    if found is None:
        raise Unavailable(
            "encoder.input_embeddings is unavailable: the encoder was called with token ids, "
            "not embeddings, so it embeds them itself; read model.token_embeddings"
        )
    return found


def _last_hidden_state(raw: Any) -> torch.Tensor:
    return raw.last_hidden_state if hasattr(raw, "last_hidden_state") else raw[0]


def _put_last_hidden_state(raw: Any, new: torch.Tensor) -> Any:
    if hasattr(raw, "last_hidden_state"):
        raw["last_hidden_state"] = new.reshape(raw.last_hidden_state.shape)
        return raw
    return (new, *raw[1:])


class Encoder(Standard):
    """The encoder of an encoder-decoder: its blocks under ``layers``, what it is called
    with and what the decoder's cross-attention reads.

    Every envoy under it runs once a generation (`runs_once`)."""

    standard_children = {"layers": ""}
    order = ("input_embeddings", "layers", "encoder_output")
    runs_once = True

    input_embeddings = value(
        "input",
        description="[batch, seq, hidden]: the embeddings the encoder is called with, an image's features at its tokens",
    )(lambda encoder, raw: _embeds(raw)).writes(
        lambda encoder, raw, new: (raw[0], {**raw[1], "inputs_embeds": new.reshape(_embeds(raw).shape)})
    )
    encoder_output = value(
        "output", description="[batch, seq, hidden]: the encoder's last stream, what every cross_attn reads"
    )(lambda encoder, raw: _last_hidden_state(raw)).writes(lambda encoder, raw, new: _put_last_hidden_state(raw, new))

    @property
    def num_layers(self) -> int:
        """The encoder's blocks."""
        return len(self.layers)

    def later_step(self, step: int) -> str:
        """Why a value under this encoder is absent at generation ``step`` > 0."""
        return (
            f"this is a generation step after the first (step {step}): the encoder runs once, before the first "
            "step, and every step's decoder reads its output from then; read encoder values at the first step "
            "(before tracer.iter, or at tracer.iter[0])"
        )


#: What a call passes the decoder where it starts it itself (or computes its loss on labels).
DECODER_INPUTS = ("decoder_input_ids", "decoder_inputs_embeds", "labels")


def with_decoder_start(module: Any, args: tuple, kwargs: dict) -> dict:
    """``kwargs`` of a call to ``module``'s forward, with ``decoder_input_ids`` one start
    token a row where ``module`` is an encoder-decoder and the call passes no decoder input:
    the token its generate starts with (the generation config's ``decoder_start_token_id``,
    else its ``bos_token_id``)."""
    if not getattr(module.config, "is_encoder_decoder", False) or kwargs.keys() & set(DECODER_INPUTS):
        return kwargs
    prompt = kwargs.get("input_ids", kwargs.get("inputs_embeds", args[0] if args else None))
    generation = getattr(module, "generation_config", None)
    start = getattr(generation, "decoder_start_token_id", None)
    start = getattr(generation, "bos_token_id", None) if start is None else start
    if prompt is None or start is None:
        return kwargs
    return {**kwargs, "decoder_input_ids": torch.full((prompt.shape[0], 1), int(start), device=prompt.device)}


def post_norm_output(block: Layer, x: torch.Tensor, outputs: list[torch.Tensor]) -> torch.Tensor:
    """What a post-norm ``block`` returns for ``x`` given its sublayers' outputs in forward
    order: each added to the stream, then the block's norm after it (`post_norms`)."""
    for added, norm in zip(outputs, block.post_norms, strict=True):
        x = getattr(block, norm)._module(x + added)
    return x


class PostNormLayer(Layer):
    """A block that normalizes after each residual add (BART's encoder blocks).

    ``post_norms`` names the norm after each sublayer, in forward order; `post_norm_output`
    states the identity ``layer_output`` keeps."""

    post_norms: ClassVar[tuple[str, ...]] = ("self_attn_layer_norm", "final_layer_norm")


class DecoderLayer(PostNormLayer):
    """A decoder block of an encoder-decoder: ``self_attn`` (causal), ``cross_attn`` (to the
    encoder's output) and ``mlp``, each followed by its norm."""

    #: Its token mixer is ``self_attn``; ``cross_attn`` reads the encoder's output, a sublayer
    #: of its own between the mixer and the MLP.
    mixers = (Mixer("self_attn"),)
    standard_children = {"self_attn": "self_attn.", "cross_attn": "cross_attn.", "mlp": "mlp."}
    order = ("input", "self_attn", "cross_attn", "mlp", "output", "layer_output")
    post_norms: ClassVar[tuple[str, ...]] = ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm")


class MergedAttention(Attention):
    """A decoder block's one attention over its own positions and the encoder's (T5Gemma 2's):
    the queries are the decoder's; the keys and values are the block's projections of its own
    stream, then of ``encoder.encoder_output``, joined along the sequence, so one softmax
    weighs both (the block holds no ``cross_attn``).

    Read at the call to the attention function as `Attention` is, so the interior is
    ``[..., own + encoder, ...]`` along the keys: ``attention_keys`` and ``attention_values``
    ``[batch, kv_heads, own + encoder, head_dim]``, ``attention_scores`` and
    ``attention_probabilities`` ``[batch, heads, seq, own + encoder]``, ``own`` the decoder's
    positions so far (causal over them; a generation step's include the cached ones),
    ``encoder`` the encoder's, the prompt's tokens (each image's among them), last:
    `encoder_part` cuts them out. ``attention_output`` is what the block adds to the stream
    for both."""

    @staticmethod
    def encoder_part(interior: torch.Tensor, encoder_positions: int, axis: int = -1) -> torch.Tensor:
        """The encoder's part of a value of the interior: its last ``encoder_positions`` along
        the keys' ``axis`` (-1 for scores and patterns, -2 for keys and values)."""
        return interior.narrow(axis, interior.shape[axis] - encoder_positions, encoder_positions)


class OutputProjection(Mlp):
    """An MLP written inline in its block (``fc1``, the activation, ``fc2``, no module of
    its own), served at its last projection: ``mlp_output`` is that projection's output,
    what the MLP adds to the stream before the block's residual add."""

    @property
    def intermediate_size(self) -> int:
        """The MLP's hidden width: the projection's input width."""
        return int(self._module.in_features)


def ends_normed(layers: Any) -> bool:
    """Whether the stack's last block normalizes its own output (a post-norm block,
    `PostNormLayer`), so the model needs no final norm."""
    return layers is not None and len(layers) > 0 and bool(getattr(layers[-1], "post_norms", ()))


def sublayer_names(block: Layer) -> list[str]:
    """The sublayers ``block`` holds, in forward order."""
    return [name for name in block.order if name in block.standard_children and name in block.__dict__]
