"""Llama 4's tower: a ViT over 336-pixel tiles, with its class token last.

``vision_model`` cuts each tile into patches (``patch_embedding``, an unfold and a
linear map), appends a class token **after** the patches (so `Vision.class_tokens`, the
rows before them, is 0, and `Vision.trailing_tokens`, the rows after, 1), adds learned
positions, and runs its blocks (``model.layers``). Its forward then norms the stream (``layernorm_post``), drops the
class token and folds each 2 x 2 block of patches into a token with the pixel-shuffle
MLP (``vision_adapter``), and returns that: what the tower returns is already past the
steps `Vision.tower_output` stops before, so `Llama4Vision.tower_output` is read where
the norm returns, ``[tiles, patches + 1, hidden]``.
"""

from __future__ import annotations


from vlreg.plugin import Vision, patches, tower_envoys

TOWER_RENAME = {"patch_embedding": "patch_embed", "model.layers": "layers"}


class Llama4Vision(Vision):
    """Llama 4's tower (``vision_model``)."""

    trailing_tokens = 1  # the class token, appended after each tile's patches

    tower_output = patches(
        "layernorm_post.output",
        description="the last block's stream after layernorm_post, [tiles, patches + 1 (class token last), hidden]",
    )


llama4_envoys = tower_envoys(
    "llama4", ("Llama4VisionModel", "Llama4VisionEncoderLayer", "Llama4VisionAttention", "Llama4VisionMLP"),
    vision=Llama4Vision)
