"""vlreg-streams-example: a model type whose residual streams mix, served from outside vlreg.

Qwen4-Exp (transformers' ``qwen4_exp``) keeps several residual streams packed along the
hidden axis; each sublayer reads a learned mix of them and writes every stream with a weight
of its own. vlreg-qwen3-vl serves it stream by stream. This plugin, written only against
`vlreg.plugin` and the adapters other plugins publish, declares it another way and claims
its three parts with ``overrides="qwen3_vl"``, as an outside author trying another reading
would:

* a block's ``input`` and ``layer_output`` are the streams' mean, which a write reaches
  (every stream moves by the same amount);
* the block identity is the family's own (`MeanStreams.identity`: each sublayer's output
  added to every stream with that stream's weight), stated on the block class, so the
  conformance suite checks this one rather than ``input + attention + mlp``;
* the model reads its streams out through a mixer of its own, not their mean, so the logit
  lens is refused by name (``readout=``) instead of reading a mean the model never reads.

Its tests load vlreg-qwen3-vl's tiny ``qwen4_exp`` checkpoint (`vlreg.testing.build`).
"""

from typing import Any

import torch

from vlreg.plugin import (LinearAttention, MixingStreamsLayer, Mlp, MoeMlp, Plugin, Text, Tower, Wrapper, adapter,
                          returned, tower_envoys)

#: the plugin whose claims on Qwen4-Exp's parts this one's replace
OVERRIDES = "qwen3_vl"

VIT = adapter("qwen_vit")
LENS = "Qwen4-Exp reads its streams out through hyper_connection_mixer, not their mean; read model.logits"


def _no_per_layer(layer: Any) -> "str | None":
    return None if layer._module.ple is not None else "this block adds no n-gram embeddings"


class MeanStreams(MixingStreamsLayer):
    """Streams packed along the hidden axis, served as their mean."""

    streams_layout = "packed"
    order = ("input", "input_streams", "per_layer_output", "attention_injection", "self_attn", "linear_attn",
             "mlp_injection", "mlp", "output", "layer_streams", "layer_output")
    refuses = {"per_layer_output": _no_per_layer}

    @property
    def num_streams(self) -> int:
        return self._module.attn_hyper_connection.hc_count

    def collapse(self, streams: torch.Tensor) -> torch.Tensor:
        return self.each_stream(streams).mean(0)

    def expand(self, streams: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        each = self.each_stream(streams)
        return (each + (new - each.mean(0))).movedim(0, -2).flatten(-2)

    per_layer_output = returned(lambda layer: f"{layer.path}.ple.output", description="what PLE adds to every stream")
    attention_injection = returned(lambda layer: f"{layer.path}.attn_hyper_connection.output", element=2,
                                   description="each stream's weight for the mixer's output")
    mlp_injection = returned(lambda layer: f"{layer.path}.mlp_hyper_connection.output", element=2,
                             description="each stream's weight for the MLP's output")

    def identity_reads(self) -> tuple:
        mixer = "self_attn" if "self_attn" in self.__dict__ else "linear_attn"
        added = ("per_layer_output",) if self._module.ple is not None else ()
        return ("input_streams", *added, "attention_injection", f"{mixer}.attention_output", "mlp_injection",
                "mlp.mlp_output", "layer_streams")

    def identity(self, values: dict) -> torch.Tensor:
        names = list(values)
        streams = values["input_streams"] + values.get("per_layer_output", 0)
        for weights, added in zip(names[-5::2], names[-4::2]):
            streams = streams + (values[added].unsqueeze(-2) * values[weights].unsqueeze(-1)).flatten(-2)
        return streams


def text_envoys(part: Any) -> dict:
    from transformers.models.qwen4_exp import modeling_qwen4_exp as qwen4_exp

    return {qwen4_exp.Qwen4ExpTextDecoderLayer: MeanStreams,
            qwen4_exp.Qwen4ExpTextAttention: adapter("gated_attention"),
            qwen4_exp.Qwen4ExpTextGatedDeltaNet: LinearAttention, qwen4_exp.Qwen4ExpTextMLP: Mlp,
            qwen4_exp.Qwen4ExpTextSparseMoeBlock: MoeMlp}


plugin = Plugin(
    Wrapper("qwen4_exp", overrides=OVERRIDES, **VIT.mounts, text_only="model", refuses=VIT.refuses, readout=LENS,
            image_grids=lambda part: VIT.image_grids),
    Text("qwen4_exp_text", envoys=text_envoys, overrides=OVERRIDES),
    Tower("qwen4_exp_vision", rename=VIT.tower_rename, envoys=tower_envoys(
        "qwen4_exp", ("Qwen4ExpVisionModel", "Qwen4ExpVisionBlock", "Qwen4ExpVisionAttention", "Qwen4ExpVisionMLP"),
        vision=VIT.Vision, attention=VIT.Attention), overrides=OVERRIDES),
)
