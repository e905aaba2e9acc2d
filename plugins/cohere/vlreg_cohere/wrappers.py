"""The Aya Vision and Command A Vision wrappers: where the text model, tower and projector sit.

Both hold the text model at ``model.language_model``, the SigLIP tower at
``model.vision_tower`` and the projector at ``model.multi_modal_projector``, and write the
features into the token embeddings in their ``model``'s forward with its one
``inputs_embeds.masked_scatter(mask, features)``. The projector folds each 2 x 2 block of
a tile's patches into one row (its pixel shuffle, inside its forward), then a SwiGLU
(``linear_1``, chunked, ``linear_2``; Aya's norms the folded rows first): its output is
the features, a tile's tokens after another's.

What the projector reads differs:

* Aya Vision takes ``hidden_states[vision_feature_layer]`` of the tower (-1: the last
  block's stream *before* SigLIP's ``post_layernorm``), so a write to
  ``vision.tower_output`` reaches nothing, nor does one to a block after the one read:
  both are declared read-only, naming the block to edit instead;
* Command A Vision takes the tower's output itself (``last_hidden_state``, after
  ``post_layernorm``): every tower value takes a write. Its SigLIP tower keeps the
  attention-pooling ``head`` (``vision_use_head``), which runs on every forward and reaches
  nothing (the pooled row is not used).
"""

from __future__ import annotations

from vlreg.plugin import Scatter, hidden_states_read_only

RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_tower": "vision",
    "model.multi_modal_projector": "projector",
}

SCATTER = Scatter(host="model", operation="inputs_embeds_masked_scatter_0", argument=1)


#: Aya Vision's: the tower's output and the blocks after the one its projector reads take no write.
READ_ONLY = hidden_states_read_only()
