"""The GOT-OCR 2.0 and PP-Chart2Table wrapper: transformers' composite layout, and the count
of placeholders GOT's processor writes.

Both configs (``got_ocr2``, ``pp_chart2table``) load as ``GotOcr2ForConditionalGeneration``: the
text model at ``model.language_model`` (Qwen2), the tower at ``model.vision_tower``, the
projector at ``model.multi_modal_projector`` (two 3 x 3 convolutions of stride 2 over the
neck's grid, then a linear layer: its output is the features, each crop's tokens in raster
order), the features written into the embeddings by ``model``'s one
``inputs_embeds.masked_scatter``: the standard layout, stated nowhere.

``GotOcr2Processor`` writes ``num_image_tokens`` placeholders a crop, 256 unless a call says
otherwise: an option it does not save with the checkpoint. That is the published tower's
count (64 x 64 patches halved twice); a checkpoint whose tower makes another count would be
given the wrong one. `tower_tokens` (`vlreg_processor`) makes the loaded processor's default
the tower's own count, so on the published checkpoints it is the processor as loaded, and a
call's ``num_image_tokens=`` still wins. PP-Chart2Table's processor expands nothing (its
template writes the tokens), and is left as it is.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from .geometry import tokens_a_side


def tower_tokens(part: Any) -> Callable[[Any], Any]:
    """``vlreg_processor``: the processor as one whose default count of placeholders a crop is
    what the tower makes (see the module)."""
    count = tokens_a_side(part.config.vision_config) ** 2

    def adapt(processor: Any) -> Any:
        if getattr(processor, "num_image_tokens", count) == count:
            return processor
        adapted = copy.copy(processor)
        adapted.num_image_tokens = count
        return adapted

    return adapt
