"""Kosmos-2 against vlreg's conformance suite.

What the suite is told, and why:

* prompts come from the tokenizer's chat template (``Kosmos2Processor`` keeps none), which
  writes the user's text alone: the processor writes ``<s>`` and the image's tokens before it,
  one image a prompt, so a prompt of several images holds a ``<image>`` past the first, which
  vlreg refuses;
* the wrapper's forward needs an image on every call: every text prompt carries one
  (``text_images``);
* the image's tokens are ordinary ids marked by the processor's ``image_embeds_position_mask``,
  and the text model scales the embeddings before its first block: the entry says so
  (`Entry.marks`, `Entry.scaled_by`), and the suite's checks of the scatter ask it;
* the text attention projects its heads back through ``out_proj`` (renamed ``o_proj``);
* of the analysis helpers, ``tower_patterns`` refuses (an image token is a learned query that
  reads every patch) and ``compare_streams`` refuses (the forward runs no prompt without an image).
"""

from vlreg.testing import chat
from vlreg.testing.conformance import AnalysisConformance, VisionConformance, image

TEXT = "text_model.model"


class TestKosmos2(AnalysisConformance, VisionConformance):
    """A CLIP-like tower, 64 latent queries resampling its patches, a pre-norm text model."""

    checkpoint = "kosmos-2"
    text_images = 1
    analysis_refuses = {"tower_patterns": "learned queries", "compare_streams": "no prompt without an image"}
    text_generation_load = False
    native = {
        "layers": f"{TEXT}.layers",
        "embed_tokens": f"{TEXT}.embed_tokens",
        "norm": f"{TEXT}.layer_norm",
        "lm_head": "text_model.lm_head",
        "vision": "vision_model.model",
        "projector": "image_to_text_projection",
        "layers.0.mlp": f"{TEXT}.layers.0.ffn",
        "layers.0.input_layernorm": f"{TEXT}.layers.0.self_attn_layer_norm",
        "layers.0.post_attention_layernorm": f"{TEXT}.layers.0.final_layer_norm",
    }

    def image_prompt(self, model, images=1, question=None):
        return "<image>" * (images - 1) + chat(model, text=question or self.question)

    def text_prompt(self, model, text=None, generation=True):
        prompt = chat(model, text=text or self.text, generation=generation)
        return dict(model.processor(text=prompt, images=[image(56, 56)], return_tensors="pt"))
