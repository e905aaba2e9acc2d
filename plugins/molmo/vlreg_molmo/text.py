"""Molmo 2's text model (``molmo2_text``) under the standard names.

Its blocks are Llama's with Olmo 2's attention (``q_norm``/``k_norm`` over the whole
projection, ``qk_norm_type="olmo"``, or per head, ``"qwen3"``); the blocks ``rope_scaling_layers``
names rotate by the scaled rope, the others by the unscaled one. A block is pre-norm, unless
the config sets ``norm_after``: each sublayer's output is then normed before it is added::

    h = x + input_layernorm(self_attn(x))
    out = h + post_attention_layernorm(mlp(h))

so there ``attention_output`` and ``mlp_output`` (what each adds to the stream) are read at
those norms' outputs (`PostNormAttention`, `PostNormMlp`); the sublayers' own outputs stay
``self_attn.output`` and ``mlp.output``.

The wrapper's mask is causal except among an image's tokens, which attend to each other both
ways (`WHERE_NOT_CAUSAL`, in ``attention_probabilities``' description).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, eager_only, returned


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class PostNormAttention(Attention):
    """The attention of a ``norm_after`` block: what it adds is ``input_layernorm``'s output."""

    attention_output = returned(_after("input_layernorm"),
                                description="what the attention adds to the stream: its output, normed by the "
                                            "block's input_layernorm (norm_after), [batch, seq, hidden]")


class PostNormMlp(Mlp):
    """The MLP of a ``norm_after`` block: what it adds is ``post_attention_layernorm``'s output."""

    mlp_output = returned(_after("post_attention_layernorm"),
                          description="what the MLP adds to the stream: its output, normed by the block's "
                                      "post_attention_layernorm (norm_after), [batch, seq, hidden]")


WHERE_NOT_CAUSAL = ("causal, except that an image's tokens (the processor's mm_token_type_ids 1: its patches', "
                    "columns', start and end tokens) attend to each other both ways")


def _described(base: type) -> type:
    """``base`` with its pattern's description saying where Molmo 2's is not causal."""
    pattern = Attention.attention_probabilities
    described = returned(pattern.at, description=f"{pattern.description}: {WHERE_NOT_CAUSAL}")
    return type(base.__name__, (base,), {"attention_probabilities": described, "__module__": __name__,
                                        "refuses": {"attention_probabilities": eager_only}, "__doc__": base.__doc__})


MolmoAttention, MolmoPostNormAttention = _described(Attention), _described(PostNormAttention)


def envoys(part: Any) -> dict:
    from transformers.models.molmo2 import modeling_molmo2 as modeling

    after = getattr(part.config, "norm_after", False)
    return {modeling.Molmo2DecoderLayer: Layer,
            modeling.Molmo2Attention: MolmoPostNormAttention if after else MolmoAttention,
            modeling.Molmo2MLP: PostNormMlp if after else Mlp}
