"""The SigLIP and CLIP vision towers, as vision parts any wrapper can host.

A part is claimed by its ``vision_config.model_type``, so a wrapper from another plugin
(Gemma 3 hosts a SigLIP tower) gets these adapters by having a ``siglip_vision_model``
or ``clip_vision_model`` vision config, with nothing copied.

Both towers are flat in transformers 5: the module at the wrapper's ``vision`` path is
the ``*VisionModel`` itself (``embeddings``, ``encoder.layers``, ``post_layernorm``), so
`Vision.tower_output`, its output's ``last_hidden_state``, is the right stream on both:

* SigLIP's ``post_layernorm`` norms every patch, and ``last_hidden_state`` is taken
  after it, so it is the tower's ``norm``;
* CLIP's ``post_layernorm`` norms only the pooled CLS row (``pooler_output``), and
  ``last_hidden_state`` is the last block's stream before it, CLS row included. It is
  not the tower's ``norm`` and gets no standard name.

Every key is relative to the tower. None is a name a text block also has: a single
name binds on every module that has it, and ``self_attn`` and ``mlp`` already are the
standard names on both towers' blocks.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Vision, VisionAttention, VisionLayer, VisionMlp


class ClipVision(Vision):
    """The CLIP tower: a class token before the patches in every block's sequence."""

    class_tokens = 1

SIGLIP = "siglip_vision_model"
CLIP = "clip_vision_model"
MODEL_TYPES = (SIGLIP, CLIP)

#: Names both towers spell the same way.
_SHARED = {
    "embeddings.patch_embedding": "patch_embed",
    "encoder.layers": "layers",
}
_BLOCK = {
    "layer_norm1": "input_layernorm",
    "layer_norm2": "post_attention_layernorm",
}

RENAME = {
    SIGLIP: {**_SHARED, "post_layernorm": "norm", **_BLOCK},
    CLIP: {**_SHARED, **_BLOCK},
}


def rename(part: Any) -> dict[str, str]:
    return RENAME[part.model_type]


def envoys(part: Any) -> dict[type, type]:
    if part.model_type == SIGLIP:
        from transformers.models.siglip import modeling_siglip as siglip

        return {
            siglip.SiglipVisionModel: Vision,
            siglip.SiglipEncoderLayer: VisionLayer,
            siglip.SiglipAttention: VisionAttention,
            siglip.SiglipMLP: VisionMlp,
        }
    from transformers.models.clip import modeling_clip as clip

    return {
        clip.CLIPVisionModel: ClipVision,
        clip.CLIPEncoderLayer: VisionLayer,
        clip.CLIPAttention: VisionAttention,
        clip.CLIPMLP: VisionMlp,
    }
