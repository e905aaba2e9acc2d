"""The omni thinkers' text models: Qwen2.5-Omni's Qwen2 blocks, and Qwen3-Omni's Qwen3-MoE
blocks with DeepStack's additions named and refused.

Qwen3-Omni's text model adds DeepStack tap ``k`` of the tower to the stream at the image
tokens right after block ``k``. vlreg-qwen3-vl serves that on the Qwen3-VL line, in classes
of its own that it does not publish to other plugins, so here `DeepStackLayer` names the
value and refuses it with where to read it meanwhile: the rest of the blocks is served as on
any text model (``layers[k].layer_output`` is the block's own output, before DeepStack's
addition).
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Attention, Layer, Mlp, MoeMlp, value


def _taps(envoy: Any) -> int:
    return len(getattr(envoy.root._module.config.vision_config, "deepstack_visual_indexes", None) or ())


def _deepstack_not_served(layer: Any) -> str:
    taps, block = _taps(layer), layer.block_index
    if block >= taps:
        return f"the tower's {taps} DeepStack taps feed layers[0] to layers[{taps - 1}] only"
    after = f"layers[{block + 1}].input" if block + 1 < layer.root.num_layers else "norm.input"
    return (
        f"what Qwen3-Omni adds to the stream at the image tokens after this block (DeepStack tap {block}) is "
        f"not served on this family yet: {after} minus this block's layer_output, at vision.image_token_mask, "
        f"is that addition"
    )


class DeepStackLayer(Layer):
    """A Qwen3-Omni text block; what DeepStack adds after it is named and refused."""

    order = (*Layer.order, "deepstack_output")
    refuses = {"deepstack_output": _deepstack_not_served}

    deepstack_output = value(
        "output",
        description="what DeepStack adds to the stream at the image tokens after this block (not served here)",
    )(lambda layer, raw: raw)


def qwen2_5_text_envoys(part: Any) -> dict:
    from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as omni

    return {omni.Qwen2_5OmniDecoderLayer: Layer, omni.Qwen2_5OmniAttention: Attention, omni.Qwen2MLP: Mlp}


def qwen3_text_envoys(part: Any) -> dict:
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni

    return {omni.Qwen3OmniMoeThinkerTextDecoderLayer: DeepStackLayer,
            omni.Qwen3OmniMoeThinkerTextAttention: Attention,
            omni.Qwen3OmniMoeThinkerTextMLP: Mlp,  # the blocks in mlp_only_layers
            omni.Qwen3OmniMoeThinkerTextSparseMoeBlock: MoeMlp}
