"""Molmo 2's tower (``Molmo2VisionModel``, ``molmo2_vision``): SigLIP 2's block names over
batch-first ``[crops, patches, hidden]``, each crop attended on its own.

* ``patch_embedding`` is a linear map over the patches the processor flattens
  (`vision.patch_embeddings`); a fixed position table of one crop's patches is added to it,
  a parameter read in the forward (no call), and block 0 receives the sum;
* a block is pre-norm, ``layer_norm1``, ``self_attn`` (one attention call a crop), then
  ``layer_norm2``, ``mlp``; no norm ends the tower;
* the projector (``Molmo2Adapter``) reads the streams of the blocks its config lists
  (``adapter_config.vision_feature_layer``, a block ``i >= 0`` its output, ``-1`` the last
  block's) out of the tower's hidden states and concatenates them: the tower's output, and any
  block after the last one read, take no write (`READ_ONLY`).

The adapter's ``image_pooling_2d`` is of the tower's attention class (``Molmo2VisionAttention``,
used there as cross-attention of a pooled query over its window's patches): the envoys are
mapped by the tower's paths, so it is no tower attention.
"""

from __future__ import annotations

from typing import Any

from vlreg.plugin import Vision, VisionAttention, VisionLayer, VisionMlp, hidden_states_read_only

RENAME = {"patch_embedding": "patch_embed", "layer_norm1": "input_layernorm",
          "layer_norm2": "post_attention_layernorm"}

#: The wrapper's refusal rows: the projector reads listed blocks' streams, not the output.
READ_ONLY = hidden_states_read_only(name="adapter_config.vision_feature_layer", blocks=True)


def envoys(part: Any) -> dict:
    """The tower's modules by path (its attention's class is the adapter's pooling's too)."""
    from transformers.models.molmo2 import modeling_molmo2 as modeling

    return {modeling.Molmo2VisionModel: Vision, modeling.Molmo2VisionEncoderLayer: VisionLayer,
            modeling.Molmo2VisionMLP: VisionMlp, "vision_tower.layers.*.self_attn": VisionAttention}
