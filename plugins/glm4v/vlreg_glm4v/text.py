"""The GLM-V line's text blocks, under the standard names.

* GLM-4.1V's blocks (``glm4v_text``; GLM-OCR's ``glm_ocr_text`` is the same block) norm
  each sublayer's output before the stream adds it, under names of their own::

      h = x + post_self_attn_layernorm(self_attn(input_layernorm(x)))
      y = h + post_mlp_layernorm(mlp(post_attention_layernorm(h)))

  ``post_attention_layernorm`` is the norm *before* the MLP here, not after the attention
  (Gemma's sandwich uses that name for the attention's post-norm), so `SandwichAttention`
  reads ``attention_output`` at ``post_self_attn_layernorm`` and `SandwichMlp` reads
  ``mlp_output`` at ``post_mlp_layernorm``: what each adds to the stream, so that
  ``input + attention_output + mlp_output == layer_output`` holds. The sublayers' own
  outputs stay ``self_attn.output`` and ``mlp.output``. The MLP projects up through one
  fused ``gate_up_proj``; its width is ``down_proj``'s input.
* GLM-4.5V's blocks (``glm4v_moe_text``) are plain pre-norm blocks; the first
  ``first_k_dense_replace`` hold a dense MLP and the rest DeepSeek-V3's mixture of
  experts (`vlreg.plugin.GroupRoutedMoe`: a sigmoid group router beside shared experts).
* GLM-5-Next's text model (``glm5_next_text``):

  * **Manifold-constrained hyper-connections.** The text model repeats the embeddings into
    ``hc_mult`` streams on an axis of their own, ``[batch, seq, streams, hidden]``. Before each
    sublayer a hyper-connection (``attn_hc``, ``ffn_hc``) computes from every stream three
    weights: a collapse of the streams into the sublayer's input (``attention_mix``,
    ``mlp_mix``), the weight each stream adds the sublayer's output with
    (``attention_injection``, ``mlp_injection``, ``[batch, seq, streams]``) and a
    doubly-stochastic matrix mixing the streams themselves (``attention_residual_mixing``,
    ``mlp_residual_mixing``, ``[batch, seq, streams, streams]``)::

        streams = injection[..., None] * sublayer_output[..., None, :] + mixing^T @ streams

    The readout is ``norm(hc_head(streams))``, ``hc_head`` the streams' plain mean, so
    ``input`` and ``layer_output`` are that mean (`Glm5NextLayer`): the logit lens of any
    block is the model's own readout there. A write moves every stream by the same amount, so
    that their mean is what was written.
  * **Two kinds of mixer at ``self_attn``** (``layer_types``): on ``"linear_attention"`` blocks
    a Kimi delta attention (KDA), served as ``layers[i].linear_attn`` (`KimiDeltaAttention`,
    decays per channel; `Glm5NextLayer.mixers`); on ``"indexed_attention"`` blocks latent
    attention without positions (NoPE) whose keys a DSA indexer selects per query (`Glm5NextAttention`): its candidates are
    pools of ``index_kpool`` consecutive keys, and the incomplete last pool is always read.
    ``"shared"`` blocks (``indexer_types``) run no indexer and reuse the selection of the
    block before; a block whose selection is reused cannot be skipped alone.
  * **Experts**: a dense MLP on ``"dense"`` blocks (``mlp_layer_types``), DeepSeek-V3's
    routed experts beside a shared one elsewhere (`GroupRoutedMoe`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import torch

from vlreg.plugin import (Attention, GroupRoutedMoe, Layer, LatentAttention, LinearAttention, Mixer, Mlp,
                          MixingStreamsLayer, SparseAttention, argument, modeling_envoys, returned)

#: sandwich-normed text model type -> (transformers module, class-name prefix)
SANDWICHED = {"glm4v_text": ("glm4v", "Glm4vText"), "glm_ocr_text": ("glm_ocr", "GlmOcrText")}


def _after(norm: str):
    """The output of the block's ``norm``, located from a sublayer of that block."""
    return lambda sublayer: f"{sublayer.parent.path}.{norm}.output"


class SandwichAttention(Attention):
    """A GLM-4.1V attention, whose block norms its output before adding it."""

    attention_output = returned(
        _after("post_self_attn_layernorm"),
        description="what the attention adds to the stream: its output after the block's post_self_attn_layernorm",
    )


class SandwichMlp(Mlp):
    """A GLM-4.1V MLP, whose block norms its output before adding it."""

    mlp_output = returned(
        _after("post_mlp_layernorm"),
        description="what the MLP adds to the stream: its output after the block's post_mlp_layernorm",
    )

    @property
    def intermediate_size(self) -> int:
        """The MLP's hidden width (``gate_up_proj`` projects to twice it, gate and up fused)."""
        return int(self._module.down_proj.in_features)


def sandwich_envoys(part: Any) -> dict:
    """GLM-4.1V's and GLM-OCR's blocks, by the part's own model type (`SANDWICHED`)."""
    module, prefix = SANDWICHED[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    return {getattr(modeling, f"{prefix}DecoderLayer"): Layer,
            getattr(modeling, f"{prefix}Attention"): SandwichAttention,
            getattr(modeling, f"{prefix}MLP"): SandwichMlp}


#: GLM-4.5V's blocks: pre-norm, a dense MLP or DeepSeek-V3's experts (`GroupRoutedMoe`).
moe_envoys = modeling_envoys("glm4v_moe", {"Glm4vMoeTextDecoderLayer": Layer, "Glm4vMoeTextAttention": Attention,
                                           "Glm4vMoeTextMLP": Mlp, "Glm4vMoeTextMoE": GroupRoutedMoe})


def _hc(which: str, element: int, description: str) -> Any:
    return returned(lambda layer: f"{layer.path}.{which}.output", element=element, description=description)


class Glm5NextLayer(MixingStreamsLayer):
    """A GLM-5-Next block: streams on their own axis (see the module), read out as their
    mean; returns ``(streams, selection)``, the selection a ``"shared"`` next block reuses."""

    streams_layout = "axis"
    returns_tuple = True
    #: the linear blocks' mixer sits at self_attn natively
    mixers = (Mixer("self_attn"), Mixer("linear_attn", native="self_attn",
                                        where=lambda block: block.block_type == "linear_attention"))
    order = ("input", "input_streams", "attention_injection", "attention_residual_mixing", "attention_mix",
             "self_attn", "linear_attn", "mlp_injection", "mlp_residual_mixing", "mlp_mix", "mlp", "output",
             "layer_streams", "layer_output")

    attention_injection = _hc("attn_hc", 0, "the weight each stream adds the mixer's output with, [batch, seq, streams]")
    attention_residual_mixing = _hc(
        "attn_hc", 1, "the doubly-stochastic matrix the streams are mixed with around the mixer, "
                      "[batch, seq, streams in, streams out]")
    attention_mix = _hc("attn_hc", 2, "the collapse of every stream the mixer reads (before input_layernorm), "
                                      "[batch, seq, hidden]")
    mlp_injection = _hc("ffn_hc", 0, "the weight each stream adds the MLP's output with, [batch, seq, streams]")
    mlp_residual_mixing = _hc(
        "ffn_hc", 1, "the doubly-stochastic matrix the streams are mixed with around the MLP, "
                     "[batch, seq, streams in, streams out]")
    mlp_mix = _hc("ffn_hc", 2, "the collapse of every stream the MLP reads (before post_attention_layernorm), "
                               "[batch, seq, hidden]")

    @property
    def num_streams(self) -> int:
        """The hyper-connection streams (``hc_mult``)."""
        return int(self._module.attn_hc.hc_mult)

    def expand(self, streams: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """Every stream moved by the same amount, so that their mean is ``new``."""
        return streams + (new - streams.mean(-2)).unsqueeze(-2)

    def skipped_output(self) -> Any:
        """Every stream it takes, and the selection it was handed, as a ``"shared"`` block
        hands it on."""
        _, kwargs = self.inputs
        return (self.input_streams, kwargs.get("prev_topk_indices"))

    def why_not_skipped(self, skipped: range) -> str | None:
        """A block whose indexer selection the next ``"shared"`` blocks reuse cannot be
        skipped unless they are too."""
        mixer = self.__dict__.get("self_attn")
        waiting = [i for i in (mixer.reused_by() if isinstance(mixer, SparseAttention) else []) if i not in skipped]
        if not waiting:
            return None
        return f"layers {waiting} reuse its indexer's selection (indexer_types 'shared'); skip them too"

    def identity_reads(self) -> tuple[str, ...]:
        mixer = "self_attn" if "self_attn" in self.__dict__ else "linear_attn"
        return ("input_streams", "attention_injection", "attention_residual_mixing", f"{mixer}.attention_output",
                "mlp_injection", "mlp_residual_mixing", "mlp.mlp_output", "layer_streams")

    def identity(self, values: dict) -> torch.Tensor:
        """Each sublayer: its output added to every stream with that stream's weight, beside
        the streams mixed by the doubly-stochastic matrix."""
        attention = next(read for name, read in values.items() if name.endswith(".attention_output"))
        streams = values["input_streams"]
        for added, weights, mixing in ((attention, values["attention_injection"], values["attention_residual_mixing"]),
                                       (values["mlp.mlp_output"], values["mlp_injection"], values["mlp_residual_mixing"])):
            streams = weights.unsqueeze(-1) * added.unsqueeze(-2) + mixing.transpose(-1, -2) @ streams
        return streams


class KimiDeltaAttention(LinearAttention):
    """GLM-5-Next's linear mixer: Kimi's delta attention, whose decays are per channel
    (``[batch, seq, heads, head_dim]``), not per head; as many key heads as value heads."""

    rule = "chunk_kimi_delta_attention_0"
    decays = argument("g", lambda m: f"{m.path}.source.{m.rule}.input",
                      description="each token's decay per head and channel, in log space, [batch, seq, heads, head_dim]")

    @property
    def num_key_heads(self) -> int:
        return int(self._module.num_heads)

    num_value_heads = num_key_heads

    @property
    def key_head_dim(self) -> int:
        return int(self._module.head_dim)

    value_head_dim = key_head_dim


class Glm5NextAttention(SparseAttention, LatentAttention):
    """GLM-5-Next's indexed attention: latent attention without positions, its keys cut per
    query by a DSA indexer whose candidates are pools of ``index_kpool`` keys
    (``indexer_scores`` ``[batch, queries, pools]``)."""

    order = ("query_latents", "kv_latents", *SparseAttention.order)
    refuses = {**LatentAttention.refuses, **SparseAttention.refuses}
    scores_operation = "index_scores_masked_fill_0"
    # a reusing block's selection is read where the mask is built of it, after the latents
    shared_at, shared_selection = "self_build_attention_mask_from_topk_0", "topk_indices"


glm5_next_envoys = modeling_envoys("glm5_next", {
    "Glm5NextTextDecoderLayer": Glm5NextLayer, "Glm5NextTextAttention": Glm5NextAttention,
    "Glm5NextTextLinearAttention": KimiDeltaAttention, "Glm5NextTextMLP": Mlp, "Glm5NextTextMoE": GroupRoutedMoe})
