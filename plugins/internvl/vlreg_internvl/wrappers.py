"""The InternVL wrapper (``InternVLForConditionalGeneration``): where its parts sit.

The text model is at ``model.language_model``, the InternViT at ``model.vision_tower``
and the projector at ``model.multi_modal_projector``. ``InternVLModel.get_image_features``
takes the tower's stream (``vision_feature_layer``: -1 is the tower's output), drops the
class token, folds each 2 x 2 block of patches into one row (the pixel shuffle, which
has no module) and projects the rows; ``forward`` writes them into the token embeddings
with ``inputs_embeds.masked_scatter(mask, features)``. The projector's output is the
features, one row per token, tile after tile.

With ``vision_feature_layer`` other than -1 the projector reads a block's stream out of
the tower's hidden states instead of its output: the tower's output and the blocks after
that one reach nothing, and are declared read-only.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Scatter

MODEL_TYPES = ("internvl",)

RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def rename(part: Any) -> dict[str, str]:
    return RENAME


def envoys(part: Any) -> None:
    return None


def read_only(part: Any) -> dict[str, Any]:
    layer = part.config.vision_feature_layer
    if layer == -1:
        return {}
    depth = part.config.vision_config.num_hidden_layers
    read = layer % (depth + 1) - 1  # hidden_states[i] is block i - 1's output, 0 the embeddings'
    setting = f"vision_feature_layer={layer}"

    def tower_output(vision: Any) -> str:
        return (
            f"the projector reads the stream of vision.layers[{read}] ({setting}) out of the tower's "
            f"hidden states, not the tower's output; edit vision.layers[{read}].layer_output"
        )

    def after_read(envoy: Any) -> str | None:
        if envoy.block_index is None or envoy.block_index <= read:
            return None
        return f"the projector reads vision.layers[{read}]'s stream ({setting}), so nothing later reaches the text model"

    return {"vision.tower_output": tower_output, "vision.*": after_read}
