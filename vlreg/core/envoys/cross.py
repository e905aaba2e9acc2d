"""Cross-attention: the image reaches the text model beside its token stream.

A family whose wrapper declares a `CrossAttention` (Mllama) writes nothing into the
embeddings: the projected tower output goes to the text model as an argument, and only
some blocks read it, each through an attention whose queries are the text and whose keys
and values are that block's projections of the image's states. vlreg serves it so:

* ``vision.image_features`` is the argument itself, ``[batch, positions, hidden]`` (each
  batch row's images, tiles and patches in the order the keys run over them), read where
  the text model is called: an edit there reaches every cross-attention block, and no
  block before the first of them;
* a block that cross-attends is a `CrossAttentionLayer`, with its attention at
  ``cross_attn`` (a `CrossAttentionMixer`): ``attention_queries`` from the text,
  ``attention_keys`` and ``attention_values`` from the image, ``attention_probabilities``
  from each text token to the image's positions (under eager);
* ``model.cross_attention_layers`` lists those blocks; the others are plain `Layer`.

Cross-attention blocks run only when an image reaches the model (the text model skips
them on a prompt without one), so their values refuse, with the reason, where none does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from ..serving.values import argument, returned
from .mixers import Mixer
from .text import Attention, Layer, eager_only


def _call(attention: Any) -> str:
    return f"{attention.path}.source.{attention.interface}.input"


class CrossAttentionMixer(Attention):
    """A block's attention from the text to the image.

    Read at its call to the attention function, as `Attention` is: ``attention_queries``
    ``[batch, heads, seq, head_dim]`` are the text's; ``attention_keys`` and
    ``attention_values`` ``[batch, kv_heads, positions, head_dim]`` are this block's
    projections of ``vision.image_features`` (what `project` computes); the pattern
    ``[batch, heads, seq, positions]`` weights the image's positions for each text token,
    the mask (padded tiles, text before its image) added. ``attention_output`` is what
    the module returns; the block may scale it before the stream adds it
    (`CrossAttentionLayer.attention_gate`).
    """

    refuses = dict.fromkeys(("attention_queries", "attention_keys", "attention_values"), eager_only)
    attention_queries = argument(
        1, _call, description="the text's queries, as the attention function takes them"
    )
    attention_keys = argument(
        2, _call, description="the keys: this block's projection of the image's states"
    )
    attention_values = argument(
        3, _call, description="the values: this block's projection of the image's states"
    )
    attention_output = returned(description="what the attention returns, before any gate of its block")

    def project(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values this attention makes of ``states`` (``[batch, positions,
        hidden]``, as `vision.image_features` serves them), in ``attention_keys``' layout.
        A family whose attention norms or reshapes them otherwise overrides this."""
        module = self._module
        heads, width = self.num_kv_heads, self.head_dim
        keys = module.k_proj(states).view(states.shape[0], -1, heads, width).transpose(1, 2)
        values = module.v_proj(states).view(states.shape[0], -1, heads, width).transpose(1, 2)
        return keys, values


class CrossAttentionLayer(Layer):
    """A block that attends from the text to the image (``cross_attn``), then runs its MLP.

    ``layer_output`` is the block's own output. Where the block scales what each sublayer
    adds (Mllama's tanh gates), ``attention_gate`` and ``mlp_gate`` are the factors, so
    ``input + attention_gate * cross_attn.attention_output + mlp_gate * mlp.mlp_output ==
    layer_output``, where a family serves a ``text_row_mask`` that sublayer's output times it
    (`row_masked`). Its values need an image in the run: the text model skips the block
    without one.
    """

    mixers = (Mixer("cross_attn"),)
    #: The sublayer whose output reaches only the rows of a family's ``text_row_mask``
    #: (``"mlp"``: Mllama's, whose tokens before any image take no MLP; ``"attention"``:
    #: IDEFICS's, whose take no attention).
    row_masked: ClassVar[str] = "mlp"
    #: Why its values are absent from a run no image reaches.
    skipped: ClassVar[str] = (
        "cross-attention blocks run only when an image reaches the model (the text model skips them otherwise)"
    )

    def no_images(self) -> str | None:
        """Why this block never runs on this load (``None``: it runs when a trace's input
        carries images); every value under it refuses with this reason."""
        vision = self.root.__dict__.get("vision")
        if vision is None:
            return (f"a text-only load builds no tower, so no image reaches the model and {self.skipped}; "
                    "load with task='image-text-to-text'")
        reason = vision.no_images()
        return f"{reason}, and {self.skipped}" if reason else None

    @property
    def attention_gate(self) -> Any:
        """What the block multiplies the attention's output by before adding it (1: none)."""
        return 1.0

    @property
    def mlp_gate(self) -> Any:
        """What the block multiplies the MLP's output by before adding it (1: none)."""
        return 1.0
