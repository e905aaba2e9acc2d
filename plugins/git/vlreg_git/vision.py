"""GIT's tower (``git_vision_model``): CLIP's, one level down.

``GitVisionModel`` holds ``vision_model`` (``embeddings``, ``pre_layrnorm``,
``encoder.layers`` of CLIP blocks, ``post_layernorm``); unlike CLIP's, its
``post_layernorm`` norms every row, class token first, and ``last_hidden_state`` is taken
after it: the tower's ``norm``, and ``vision.tower_output`` is what the projector reads.
Every key is relative to the tower; none is a name a text block holds (BERT's blocks spell
theirs ``attention``, ``intermediate``, ``output``).
"""

from __future__ import annotations

from vlreg.plugin import Vision, tower_envoys

RENAME = {
    "vision_model.embeddings.patch_embedding": "patch_embed",
    "vision_model.encoder.layers": "layers",
    "vision_model.post_layernorm": "norm",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
}


class GitVision(Vision):
    """GIT's CLIP tower: a class token before each image's patches, in every block and in
    what the projector reads (the image's first token in the prefix)."""

    class_tokens = 1


envoys = tower_envoys("git", ("GitVisionModel", "GitVisionEncoderLayer", "GitVisionAttention", "GitVisionMLP"),
                      vision=GitVision)
