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

from vlreg.plugin import Scatter, hidden_states_read_only

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


def read_only(part: Any) -> dict[str, Any]:
    vision = part.config.vision_config
    return hidden_states_read_only(part.config.vision_feature_layer, vision.num_hidden_layers)
