"""The Qwen3 line's text blocks: DeepStack's additions after the first blocks, and
Qwen3.5's gated attention.

Qwen3-VL's text model adds each DeepStack tap to the stream at the image tokens right
after text block ``k`` returns, from one call site in its loop over the blocks
(``self._deepstack_process(hidden_states, visual_pos_masks, deepstack_visual_embeds[k])``),
so tap ``k`` is call ``k`` of that operation. `DeepStackLayer.deepstack_output` reads it
there: ``[image_tokens, hidden_size]``, what is added; ``layer_output`` stays the block's
own output, so ``layers[k + 1].input[mask] == layers[k].layer_output[mask] +
layers[k].deepstack_output`` and the block identity both hold.

`TEXTS` names each text model's classes by its own ``model_type`` (``qwen3_5_text`` is
Qwen3.5's, whichever wrapper hosts it), and `text_envoys` maps them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from nnsight.intervention.util import first_input, replace_first_input

from vlreg.plugin import IMAGES, At, Attention, Layer, LinearAttention, Mlp, MoeMlp, argument, eager_only, value

#: text model type -> (its transformers module, the class-name prefix of its text classes)
TEXTS = {
    "qwen3_vl_text": ("qwen3_vl", "Qwen3VLText"),
    "qwen3_vl_moe_text": ("qwen3_vl_moe", "Qwen3VLMoeText"),
    "qwen3_5_text": ("qwen3_5", "Qwen3_5"),
    "qwen3_5_moe_text": ("qwen3_5_moe", "Qwen3_5Moe"),
    # Qwen3-VL's text model with Cohere2's blocks: parallel (the attention and the MLP both read
    # input_layernorm's output, the block returns their plain sum), DeepStack after the first
    "cohere_compass_text": ("cohere_compass", "CohereCompass"),
}


def _text_model(layer: Any) -> Any:
    return layer.parent.parent


def _no_tap(layer: Any) -> str | None:
    taps = len(getattr(layer.root._module.config.vision_config, "deepstack_visual_indexes", None) or ())
    if layer.block_index < taps:
        return None
    return (
        f"the tower's {taps} DeepStack taps feed layers[0] to layers[{taps - 1}] only "
        f"(vision_config.deepstack_visual_indexes)"
    )


class DeepStackLayer(Layer):
    """A Qwen3-VL text block, and what DeepStack adds after it."""

    order = (*Layer.order, "deepstack_output")
    refuses = {"deepstack_output": (_no_tap, IMAGES)}

    deepstack_output = argument(
        2,
        At(lambda layer: f"{_text_model(layer).path}.source.self__deepstack_process_0.input",
           inside=_text_model, occurrence=lambda layer: layer.block_index),
        layout="image_tokens",
        description="what DeepStack adds to the stream at the image tokens after this block, [image_tokens, hidden]",
    )


def _heads(attention: Any, flat: Any) -> Any:
    """``[batch, seq, heads * head_dim]`` as ``[batch, seq, heads, head_dim]`` (a view)."""
    return flat.view(*flat.shape[:-1], -1, attention.head_dim)


class GatedAttention(Attention):
    """Qwen3.5's full attention: its heads are gated per channel (``sigmoid`` of a second
    half of ``q_proj``) before ``o_proj``, so `attention_head_outputs` is read where
    ``o_proj`` receives them, after the gate: ``o_proj(attention_head_outputs) ==
    attention_output`` holds as on any block. The ungated outputs are the attention
    function's (``self_attn.source.attention_interface_1.output``)."""

    refuses = {"attention_head_outputs": eager_only}
    attention_head_outputs = value(
        lambda attention: f"{attention.o_proj.path}.input",
        description="each head's output as o_proj receives it, after the output gate",
    )(lambda attention, raw: _heads(attention, first_input(*raw))).writes(
        lambda attention, raw, new: replace_first_input(*raw, new.reshape(first_input(*raw).shape))
    )


def text_envoys(part: Any) -> dict:
    """The text model's classes onto their envoys, by the part's own model type. Qwen3.5's
    blocks mix tokens by gated full attention or by a gated delta net; the MoE variants
    route their MLPs (a dense `Mlp` stays on ``mlp_only_layers`` and the shared expert)."""
    module, prefix = TEXTS[part.model_type]
    modeling = import_module(f"transformers.models.{module}.modeling_{module}")
    hybrid = hasattr(modeling, f"{prefix}GatedDeltaNet")  # Qwen3.5: linear and full blocks
    found = {
        getattr(modeling, f"{prefix}DecoderLayer"): Layer if hybrid else DeepStackLayer,
        getattr(modeling, f"{prefix}Attention"): GatedAttention if hybrid else Attention,
    }
    if hybrid:
        found[getattr(modeling, f"{prefix}GatedDeltaNet")] = LinearAttention
    found[getattr(modeling, f"{prefix}MLP")] = Mlp  # dense blocks (mlp_only_layers), or the shared expert
    sparse = getattr(modeling, f"{prefix}SparseMoeBlock", None)
    if sparse is not None:
        found[sparse] = MoeMlp
    return found
