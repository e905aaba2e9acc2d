"""The Qwen3 line's text blocks: DeepStack's additions after the first blocks.

Qwen3-VL's text model adds each DeepStack tap to the stream at the image tokens right
after text block ``k`` returns, from one call site in its loop over the blocks
(``self._deepstack_process(hidden_states, visual_pos_masks, deepstack_visual_embeds[k])``),
so tap ``k`` is call ``k`` of that operation. `DeepStackLayer.deepstack_output` reads it
there: ``[image_tokens, hidden_size]``, what is added; ``layer_output`` stays the block's
own output, so ``layers[k + 1].input[mask] == layers[k].layer_output[mask] +
layers[k].deepstack_output`` and the block identity both hold.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Layer, argument


def _text_model(layer: Any) -> Any:
    return layer.parent.parent


def _no_tap(layer: Any) -> str | None:
    taps = len(getattr(layer.root._module.config.vision_config, "deepstack_visual_indexes", None) or ())
    if layer._block < taps:
        return None
    return (
        f"the tower's {taps} DeepStack taps feed layers[0] to layers[{taps - 1}] only "
        f"(vision_config.deepstack_visual_indexes)"
    )


class DeepStackLayer(Layer):
    """A Qwen3-VL text block, and what DeepStack adds after it."""

    order = ("input", "self_attn", "mlp", "output", "layer_output", "deepstack_output")

    deepstack_output = argument(
        2,
        lambda layer: f"{_text_model(layer).path}.source.self__deepstack_process_0.input",
        inside=_text_model,
        occurrence=lambda layer: layer._block,
        unavailable=_no_tap,
        needs_images=True,
        description="what DeepStack adds to the stream at the image tokens after this block, [image_tokens, hidden]",
    )
