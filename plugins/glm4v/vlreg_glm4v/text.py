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
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from vlreg.plugin import Attention, GroupRoutedMoe, Layer, Mlp, modeling_envoys, returned

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
