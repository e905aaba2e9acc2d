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
  ``first_k_dense_replace`` hold a dense MLP and the rest a mixture of experts
  (`GlmMoe`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, SharedExpertsAfter, modeling_envoys, returned, value

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


def _tokens(mlp: Any, raw: Any) -> Any:
    """``[batch, seq, hidden]`` as ``[tokens, hidden]`` (a view)."""
    return raw.view(-1, raw.shape[-1])


class GlmMoe(SharedExpertsAfter):
    """GLM-4.5V's mixture of experts (``Glm4vMoeTextMoE``, DeepSeek-V3's design).

    Its router (``gate``) scores every expert with a **sigmoid** of ``router_logits`` (no
    softmax). It chooses each token's experts with those scores plus a learned
    ``e_score_correction_bias``, only among the ``topk_group`` best of ``n_group`` groups
    of experts (a group's score is the sum of its two best), then weighs the chosen
    experts by their sigmoids *without* the bias, renormalized to sum to 1
    (``norm_topk_prob``) and times ``routed_scaling_factor``: ``expert_weights`` are not
    probabilities and sum to that factor. The chosen experts come in no particular order.
    A shared expert (``shared_experts``) runs on every token beside them, and the block
    adds both.
    """

    expert_weights = value(
        lambda mlp: f"{mlp.gate.path}.output", layout="tokens",
        description="each chosen expert's sigmoid score, renormalized and times routed_scaling_factor, [tokens, top_k]",
    )(lambda mlp, raw: raw[1]).writes(lambda mlp, raw, new: (raw[0], new, raw[2]))
    expert_indices = value(
        lambda mlp: f"{mlp.gate.path}.output", layout="tokens",
        description="the experts each token is routed to, [tokens, top_k], in no order (sigmoid plus "
                    "e_score_correction_bias, within the best groups)",
    )(lambda mlp, raw: raw[2]).writes(lambda mlp, raw, new: (raw[0], raw[1], new))
    shared_expert_output = value(
        lambda mlp: f"{mlp.shared_experts.path}.output", layout="tokens",
        description="the shared expert's output, [tokens, hidden]",
    )(_tokens).writes(lambda mlp, raw, new: new.reshape(raw.shape))

    @property
    def routed_scaling_factor(self) -> float:
        """What the renormalized routing weights are multiplied by."""
        return float(self._module.gate.routed_scaling_factor)

    @property
    def n_group(self) -> int:
        """The groups the experts are cut into for routing."""
        return int(self._module.gate.num_group)

    @property
    def topk_group(self) -> int:
        """The groups each token's experts are chosen among."""
        return int(self._module.gate.topk_group)


def sandwich_envoys(part: Any) -> dict:
    """GLM-4.1V's and GLM-OCR's blocks, by the part's own model type (`SANDWICHED`)."""
    module, prefix = SANDWICHED[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    return {getattr(modeling, f"{prefix}DecoderLayer"): Layer,
            getattr(modeling, f"{prefix}Attention"): SandwichAttention,
            getattr(modeling, f"{prefix}MLP"): SandwichMlp}


#: GLM-4.5V's blocks: pre-norm, a dense MLP or `GlmMoe`.
moe_envoys = modeling_envoys("glm4v_moe", {"Glm4vMoeTextDecoderLayer": Layer, "Glm4vMoeTextAttention": Attention,
                                           "Glm4vMoeTextMLP": Mlp, "Glm4vMoeTextMoE": GlmMoe})
