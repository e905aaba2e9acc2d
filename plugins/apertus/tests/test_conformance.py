"""Apertus 1.5 (transformers 5.24 and later) against the conformance suite the core ships: the vision
tokenizer's encoder as a vision part with no blocks and no patch embedding, each image's
codes embedded in a call of their own, their embeddings at the scatter.

What the suite is told, and why:

* the quantizer (``projector``) outputs codebook ids, not the features;
* ``vision.patch_embeddings`` is refused (the encoder's first convolution runs at every
  pixel), and ``tower_patterns`` with it (no blocks);
* transformers (5.24, 5.25) refuses ``attn_implementation="sdpa"`` for the whole model: the vision
  tokenizer, built under the same setting, declares no sdpa support.
"""

import pytest

pytest.importorskip("transformers.models.apertus1p5", reason="apertus1p5: not in this transformers release (5.24 adds it)")

from vlreg.testing.conformance import AnalysisConformance, VisionConformance  # noqa: E402


class TestApertus1p5(AnalysisConformance, VisionConformance):
    """A 112 x 84 image (9 x 6 codes) and a 40 x 32 one (5 x 4): the analysis runs on the
    first, the two-invoke tests take both."""

    checkpoint = "apertus1p5"
    native = {"vision": "model.vision_tokenizer.encoder", "projector": "model.vision_tokenizer.quantize",
              "lm_head": "lm_head", "layers": "model.language_model.layers",
              "embed_tokens": "model.language_model.embed_tokens", "norm": "model.language_model.norm",
              "layers.0.self_attn": "model.language_model.layers.0.self_attn",
              "layers.0.mlp": "model.language_model.layers.0.mlp",
              "layers.0.input_layernorm": "model.language_model.layers.0.attention_layernorm",
              "layers.0.post_attention_layernorm": "model.language_model.layers.0.feedforward_layernorm"}
    image_sizes = ((112, 84), (40, 32))
    tower_blocks = False
    projector_output_is_features = False
    unavailable = {"vision.patch_embeddings": "no patch embedding"}
    analysis_refuses = {"tower_patterns": "is convolutional"}
    supports_sdpa = False
