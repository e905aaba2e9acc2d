"""Chameleon and Emu3 against the conformance suite the core ships: the VQ encoder as a
vision part with no blocks and no patch embedding, the codes' embeddings at the scatter.

What the suite is told, and why:

* the quantizer (``projector``) outputs codebook ids, not the features;
* ``vision.patch_embeddings`` is refused (the encoder's first convolution runs at every
  pixel), and ``tower_patterns`` with it (no blocks);
* the processor writes text the tokenizer alone does not: Emu3's its BOS before every
  prompt, Chameleon's its separator after it (its chat mode), so a text-only load, which
  has no processor, is given that text written out;
* Chameleon's published checkpoint has no chat template: its prompts are text with
  ``<image>`` where the image goes, as transformers' documentation writes them.
"""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg_chameleon.checkpoints import EMU3_BOS, IMAGE, SEP

VQ = {"vision": "model.vqmodel.encoder", "projector": "model.vqmodel.quantize", "lm_head": "lm_head"}


class CodesConformance(AnalysisConformance, VisionConformance):
    tower_blocks = False
    projector_output_is_features = False
    unavailable = {"vision.patch_embeddings": "no patch embedding"}
    analysis_refuses = {"tower_patterns": "is convolutional"}


class TestEmu3(CodesConformance):
    """A 112 x 84 image (9 x 6 codes) and a 40 x 32 one (5 x 4): the analysis runs on the
    first, the two-invoke tests take both."""

    checkpoint = "emu3"
    native = {**VQ, "layers": "model.text_model.layers", "embed_tokens": "model.text_model.embed_tokens",
              "norm": "model.text_model.norm"}
    image_sizes = ((112, 84), (40, 32))
    processor_prefix = EMU3_BOS


class TestChameleon(CodesConformance):
    """A 112 x 84 image and an 84 x 112 one, each cropped to a centred square of 4 x 4 codes."""

    checkpoint = "chameleon"
    native = {**VQ, "layers": "model.layers", "embed_tokens": "model.embed_tokens", "norm": "model.norm",
              "layers.0.self_attn": "model.layers.0.self_attn", "layers.0.mlp": "model.layers.0.mlp"}
    image_sizes = ((112, 84), (84, 112))
    processor_suffix = SEP

    def image_prompt(self, model, images=1, question=None):
        return (question or self.question) + IMAGE * images

    def text_prompt(self, model, text=None, generation=True):
        return text or self.text


class TestChameleonSwin(TestChameleon):
    """Chameleon with its norms reordered (``swin_norm``, its largest checkpoints'): each
    sublayer's output normed before the stream adds it, read there, so the plain sum holds."""

    checkpoint = "chameleon_swin"
