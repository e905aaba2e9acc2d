"""The LLaVA and LLaVA-NeXT wrappers: where the text model, tower and projector sit.

Both hold the text model at ``model.language_model``, the tower at
``model.vision_tower`` and the projector at ``model.multi_modal_projector``, and both
write the features into the token embeddings in ``LlavaModel.forward`` (or
``LlavaNextModel.forward``) with ``inputs_embeds.masked_scatter(mask, features)``.

The projector is the last module before that call, but neither end of it is a tower
value: its input is the stream the config selects (``vision_feature_layer``, with the
CLS row dropped under the "default" strategy), and on LLaVA-NeXT its output is still
cut per crop, unpadded and given newline rows before the scatter. So
``projector.input`` and ``projector.output`` are served as they are, and
``vision.image_features`` is read at the scatter.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Scatter

MODEL_TYPES = ("llava", "llava_next")

RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

#: The first (and only) masked_scatter in the forward of the wrapper's ``model``.
SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


def rename(part: Any) -> dict[str, str]:
    return RENAME


def envoys(part: Any) -> None:
    return None


def scatter(part: Any) -> Scatter:
    return SCATTER
