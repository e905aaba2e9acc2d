"""The LLaVA, LLaVA-NeXT and LLaVA-OneVision wrappers: where the text model, tower and
projector sit.

All three hold the text model at ``model.language_model``, the tower at
``model.vision_tower`` and the projector at ``model.multi_modal_projector``, and write
the image features into the token embeddings in their ``model``'s forward with its first
``inputs_embeds.masked_scatter(mask, features)`` (OneVision's second is the video's).

The projector is the last module before that call, but neither end of it is a tower
value: its input is the stream the config selects (``vision_feature_layer``, with the
CLS row dropped under the "default" strategy), and on LLaVA-NeXT its output is still
cut per crop, unpadded and given newline rows before the scatter (on OneVision, also
shrunk where the image has many tiles). So
``projector.input`` and ``projector.output`` are served as they are, and
``vision.image_features`` is read at the scatter.

Because the projector reads a block's stream out of the tower's ``hidden_states``, a
write to ``vision.tower_output`` reaches nothing, and neither does one to a block after
the one it reads (block -2's stream on LLaVA-1.5: the last block runs for nothing): both
are declared read-only, naming the value to edit instead.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Scatter

MODEL_TYPES = ("llava", "llava_next", "llava_onevision")

RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

#: The first masked_scatter in the forward of the wrapper's ``model``: the images'.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def rename(part: Any) -> dict[str, str]:
    return RENAME


def envoys(part: Any) -> None:
    return None


def scatter(part: Any) -> Scatter:
    return SCATTER


def projected_block(config: Any) -> int:
    """The last tower block whose stream the projector reads (-1: the embeddings').

    ``hidden_states[i]`` is block ``i - 1``'s output, 0 the embeddings'; a list of
    feature layers reads several."""
    layers = config.vision_feature_layer
    depth = config.vision_config.num_hidden_layers
    chosen = layers if isinstance(layers, (list, tuple)) else [layers]
    return max(layer % (depth + 1) for layer in chosen) - 1


def read_only(part: Any) -> dict[str, Any]:
    read = projected_block(part.config)
    setting = f"vision_feature_layer={part.config.vision_feature_layer}"

    def tower_output(vision: Any) -> str:
        return (
            f"the projector reads the stream of vision.layers[{read}] ({setting}) out of the "
            f"tower's hidden states, not the tower's output; edit vision.layers[{read}].layer_output"
        )

    def after_read(envoy: Any) -> str | None:
        if envoy.block_index is None or envoy.block_index <= read:
            return None
        return (
            f"the projector reads vision.layers[{read}]'s stream ({setting}), so nothing computed "
            f"in a later block reaches the text model"
        )

    return {"vision.tower_output": tower_output, "vision.*": after_read}
