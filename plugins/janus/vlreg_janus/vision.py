"""Janus's understanding tower (``JanusVisionModel``): SigLIP's layout under classes of its own.

``embeddings.patch_embedding``, ``encoder.layers`` of pre-norm blocks (``layer_norm1``,
``self_attn``, ``layer_norm2``, ``mlp``), then ``post_layernorm`` over every patch, so the
names and envoys are the ``"siglip"`` adapter's (vlreg-llava). Two differences:

* the attention's output projection is ``projection_layer`` (SigLIP's ``out_proj``). Its
  ``q_norm`` and ``k_norm`` are identities on the published checkpoints (``use_qk_norm``
  off); with ``use_qk_norm`` on, transformers 5.23's forward fails (a LayerNorm over the
  whole width applied to each head's slice), so no such checkpoint runs;
* ``post_layernorm`` runs twice per forward: over every patch (``last_hidden_state``, what
  the aligner reads: ``vision.tower_output``), then again over the first patch's row alone
  (the unused ``pooler_output``). ``vision.norm.output`` is its first call.

There is no class token: patch ``i`` of the 24 x 24 raster is row ``i``.

`JanusVision` adds ``image_codes``, refused: Janus's VQ model encodes images to codes
only to generate images, never on the path that reads one.
"""

from __future__ import annotations

import functools

from typing import Any

from vlreg.plugin import Vision, adapter, tower_envoys, value

RENAME = adapter("siglip").rename


def _generation_only(vision: Any) -> str:
    return (
        "Janus turns images into VQ codes (model.vqmodel) only to generate images "
        "(generate(..., generation_mode='image')), which vlreg does not serve; the image a prompt carries "
        "reaches the text model as the tower's continuous features (vision.tower_output, then "
        "vision.image_features)"
    )


class JanusVision(Vision):
    """Janus's tower: SigLIP's values, and the VQ codes it never computes on understanding."""

    order = ("image_token_mask", "patch_embeddings", "layers", "tower_output", "image_codes", "image_features")
    refuses = {"image_codes": _generation_only}

    image_codes = value(
        lambda vision: f"{vision.root.path}.model.vqmodel.quantize.output",
        description="the VQ codebook ids of an image (image generation only; refused)",
    )(lambda vision, raw: raw)


#: Janus's tower classes, laid out as SigLIP's, onto the standard envoys, its tower on `JanusVision`.
envoys = tower_envoys(
    "janus", ("JanusVisionModel", "JanusVisionEncoderLayer", "JanusVisionAttention", "JanusVisionMLP"),
    vision=JanusVision)


#: The SAM attention's interior, which its sdpa class computes in one call.
SAM_INTERIOR = ("attention_queries", "attention_keys", "attention_values", "attention_scores",
                "attention_probabilities", "attention_head_outputs")
SAM_SDPA = ("the high-resolution tower's attention runs as sdpa (SamVisionSdpaAttention), one call that does not "
            "expose its interior; load with attn_implementation='eager'")


def sam_envoys(part):
    """DeepSeek-VL-Hybrid's high-resolution tower (transformers' ``SamVisionEncoder``) onto the
    ``"sam_vit"`` adapter's envoys (vlreg-got-ocr2's: GOT's tower is SAM's classes copied), as a
    second tower; on an sdpa load its attention's interior is refused (`SAM_SDPA`)."""
    from transformers.models.sam import modeling_sam as sam

    from vlreg.plugin import adapter

    found = adapter("sam_vit")
    tower, sdpa = _sam_classes(found.Vision, found.Attention)
    return {sam.SamVisionEncoder: tower, sam.SamVisionLayer: found.Layer, sam.SamVisionAttention: found.Attention,
            sam.SamVisionSdpaAttention: sdpa, sam.SamMLPBlock: found.Mlp}


@functools.cache
def _sam_classes(vision: type, attention: type) -> tuple[type, type]:
    """The second tower's class and the sdpa attention's, made once a process (a remote request
    names an envoy class by the order it was made in)."""
    from vlreg.plugin import as_second_tower

    # a windowed block's interior is per window whatever the implementation: that reason first
    refuses = {name: (attention.refuses[name], SAM_SDPA) for name in SAM_INTERIOR}
    return as_second_tower(vision), type("SamSdpaAttention", (attention,), {"refuses": refuses})
