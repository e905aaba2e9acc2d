"""IDEFICS (1) against the cross-attention conformance suite the core ships.

The tiny checkpoint's text model has 2 blocks, each after a gated cross-attention block
(``cross_layer_interval`` 1), so ``layers`` is cross 0, self 0, cross 1, self 1. Its
processor stretches every image to 28 pixels (a class token and 2 x 2 patches of 14) and
the perceiver resamples it to 4 latents: the states hold 4 positions an image.

What the suite is told, and why:

* the processor writes each image's placeholders itself, after the BOS and before the
  prompt (`Vision.writes_placeholders`), and its template is the tokenizer's;
* the text model's forward needs an image on every call (`CrossAttention.needs_images`):
  every text prompt carries one (``text_images``), one without is refused, and so is a
  text-generation load.
"""

from vlreg.testing import chat
from vlreg.testing.conformance.cross import CrossAttentionConformance

NATIVE = {
    "vision": "model.vision_model",
    "projector": "model.perceiver_resampler",
    "embed_tokens": "model.embed_tokens",
    "norm": "model.norm",
    "vision.layers": "model.vision_model.encoder.layers",
    "vision.patch_embed": "model.vision_model.embeddings.patch_embedding",
    "layers.0": "model.gated_cross_attn_layers.0",
    "layers.1": "model.layers.0",
    "layers.2": "model.gated_cross_attn_layers.1",
    "layers.3": "model.layers.1",
    "layers.2.cross_attn": "model.gated_cross_attn_layers.1.cross_attn",
    "layers.3.self_attn": "model.layers.1.self_attn",
}


class TestIdefics(CrossAttentionConformance):
    checkpoint = "idefics"
    native = NATIVE
    text_images = 1
    #: refused before loading: the forward needs an image on every call
    text_generation_load = False

    def image_prompt(self, model, images=1, question=None):
        """The processor writes the first image's placeholders itself: a prompt of more
        images holds the rest, which vlreg refuses (`Vision.writes_placeholders`)."""
        return "<image>" * (images - 1) + chat(model, text=question or self.question)
