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

from attrs import frozen

from vlreg.plugin import Vision, tower_envoys


class ClipVision(Vision):
    """The CLIP tower: a class token before the patches in every block's sequence."""

    class_tokens = 1


SIGLIP = "siglip_vision_model"
CLIP = "clip_vision_model"

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


@frozen
class SiglipTower:
    """The adapter ``"siglip"`` vlreg-llava publishes (its ``adapters``): the names of a tower
    laid out as SigLIP is (``embeddings.patch_embedding``, ``encoder.layers`` of blocks with
    ``layer_norm1``, ``self_attn``, ``layer_norm2``, ``mlp``, then ``post_layernorm`` over
    every patch), from the tower, for a family whose tower has that layout under classes of
    its own (Idefics3's, SmolVLM's), which `vlreg.plugin.tower_envoys` maps onto the standard
    envoys. A public promise of vlreg-llava.
    """

    rename: dict


SIGLIP_TOWER = SiglipTower(rename=RENAME[SIGLIP])

#: Each tower's module classes onto the standard envoys, CLIP's tower on `ClipVision`.
siglip_envoys = tower_envoys("siglip", ("SiglipVisionModel", "SiglipEncoderLayer", "SiglipAttention", "SiglipMLP"))
clip_envoys = tower_envoys("clip", ("CLIPVisionModel", "CLIPEncoderLayer", "CLIPAttention", "CLIPMLP"),
                           vision=ClipVision)
