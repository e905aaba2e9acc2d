"""Kosmos-2's tower (``Kosmos2VisionTransformer`` at ``vision_model.model``): CLIP's layout
(``embeddings`` with a class token, ``pre_layrnorm``, ``encoder.layers`` of ``layer_norm1``,
``self_attn``, ``layer_norm2``, ``mlp``; ``post_layernorm`` over the class token alone), so
``vision.tower_output`` is the last block's stream, class token first. The wrapper norms every
row with ``post_layernorm`` again, outside the tower, L2-normalizes them and hands them to the
projector (``image_to_text_projection``: 64 learned latent queries cross-attending to the
patches, after a dense map)."""

from vlreg.plugin import Vision, tower_envoys


class KosmosVision(Vision):
    """The tower: a class token before the patches in every block's sequence."""

    class_tokens = 1
    writes_placeholders = True  # the processor writes ``<image>`` and the image's tokens before the prompt's text


RENAME = {
    "embeddings.patch_embedding": "patch_embed",
    "encoder.layers": "layers",
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
}

envoys = tower_envoys("kosmos2", ("Kosmos2VisionTransformer", "Kosmos2VisionEncoderLayer", "Kosmos2VisionAttention",
                                  "Kosmos2VisionMLP"), vision=KosmosVision)
