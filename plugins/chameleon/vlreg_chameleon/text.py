"""The Chameleon and Emu3 text models, Llama-shaped stacks.

* ``emu3_text_model``: pre-norm blocks (``input_layernorm``, ``self_attn``,
  ``post_attention_layernorm``, ``mlp``) under the standard names, so ``input +
  attention_output + mlp_output == layer_output``.
* ``chameleon``: the same, with queries and keys normed per head (``q_norm``, ``k_norm``,
  inside the attention, before the rotary embedding: the interior reads them after both).
  A config with ``swin_norm`` (Chameleon's largest checkpoints) reorders the norms,
  Swin-style: each sublayer reads the stream as it is and its output is normed before it
  is added, ``h = x + input_layernorm(self_attn(x))``, ``y = h +
  post_attention_layernorm(mlp(h))`` (the norms keep the pre-norm block's names).
  ``attention_output`` and ``mlp_output`` are what the stream adds, so on those blocks
  they are read at the norms (`SwinAttention`, `SwinMlp`), and the plain sum holds there
  too. A Chameleon block returns a tuple, the stream first (`ChameleonLayer`).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, returned


class ChameleonLayer(Layer):
    """A Chameleon block: it returns a tuple, the stream first."""

    returns_tuple = True


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class SwinAttention(Attention):
    """A Chameleon attention whose block norms its output before adding it: what it adds is
    the output of the norm after it (the block's ``input_layernorm``)."""

    attention_output = returned(_after("input_layernorm"))


class SwinMlp(Mlp):
    """A Chameleon MLP whose block norms its output before adding it: what it adds is the
    output of the norm after it (the block's ``post_attention_layernorm``)."""

    mlp_output = returned(_after("post_attention_layernorm"))


def envoys(part: Any) -> dict[type, type]:
    """The text model's classes onto the standard envoys (Chameleon's Swin-ordered blocks
    onto `SwinAttention` and `SwinMlp`)."""
    if part.model_type == "emu3_text_model":
        from transformers.models.emu3 import modeling_emu3 as emu3

        return {emu3.Emu3DecoderLayer: Layer, emu3.Emu3Attention: Attention, emu3.Emu3MLP: Mlp}
    from transformers.models.chameleon import modeling_chameleon as chameleon

    swin = bool(part.config.swin_norm)
    return {
        chameleon.ChameleonDecoderLayer: ChameleonLayer,
        chameleon.ChameleonSwinDecoderLayer: ChameleonLayer,
        chameleon.ChameleonAttention: SwinAttention if swin else Attention,
        chameleon.ChameleonMLP: SwinMlp if swin else Mlp,
    }
