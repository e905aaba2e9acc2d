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

from vlreg.plugin import Scatter, hidden_states_read_only

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
    depth = part.config.vision_config.num_hidden_layers
    return hidden_states_read_only(part.config.vision_feature_layer, depth, output_when_last=True)
