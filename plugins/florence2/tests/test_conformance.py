"""Florence-2 against the conformance suite the core ships.

Florence-2 has no chat template: a prompt is a task token (``<CAPTION>``) or plain text,
which the processor rewrites and wraps (`image_prompt`, `text_prompt`). The image's
features enter the encoder's input embeddings (`StandardizedTransformer.prompt_entry`); the blocks are
post-norm (the suite checks `vlreg.core.envoys.seq2seq.post_norm_output`); DaViT's blocks are
not served, so the tower is checked as one without blocks; the processor writes the
image's placeholders itself (`Vision.writes_placeholders`); a lazy build is refused."""

import pytest
import torch

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

NATIVE = {
    "layers": "model.language_model.decoder.layers",
    "embed_tokens": "model.language_model.shared",
    "lm_head": "lm_head",
    "encoder": "model.language_model.encoder",
    "encoder.layers": "model.language_model.encoder.layers",
    "encoder.layers.0.mlp": "model.language_model.encoder.layers.0.fc2",
    "layers.0.cross_attn": "model.language_model.decoder.layers.0.encoder_attn",
    "layers.0.mlp": "model.language_model.decoder.layers.0.fc2",
    "vision": "model.vision_tower",
    "vision.patch_embed": "model.vision_tower.convs.0",
    "projector": "model.multi_modal_projector",
}


class TestFlorence2(AnalysisConformance, VisionConformance):
    checkpoint = "florence2"
    native = NATIVE
    plain_sum = False
    tower_blocks = False
    o_proj = "out_proj"
    analysis_refuses = {"tower_patterns": "DaViT's blocks"}
    image_sizes = ((40, 30), (32, 32))

    def image_prompt(self, model, images=1, question=None):
        """A task token, or a question as plain text (the processor takes either); the
        processor writes one image's placeholders before it, so a prompt of more images
        holds the placeholders beyond the first (which vlreg refuses)."""
        return model.processor.image_token * (images - 1) + (question or "<CAPTION>")

    def text_prompt(self, model, text=None, generation=True):
        return text or self.text

    prefixed = False

    def order_input(self, model):
        """The suite's input; where it writes every value, with a four-token decoder prefix,
        so the decoder's attention weighs several positions (over the start token alone
        every pattern is 1, and a write to the queries changes nothing)."""
        args, kwargs = super().order_input(model)
        if not self.prefixed:
            return args, kwargs
        start = model._module.config.text_config.decoder_start_token_id
        ids = model.tokenizer(" a red", add_special_tokens=False)["input_ids"][:3]
        return args, {**kwargs, "decoder_input_ids": torch.tensor([[start, *ids]])}

    def test_every_value_written_reaches_the_logits_or_refuses(self, model):
        type(self).prefixed = True
        try:
            super().test_every_value_written_reaches_the_logits_or_refuses(model)
        finally:
            type(self).prefixed = False

    def test_lazy_build_binds_the_same_names_then_dispatches(self, path, model):
        """Refused by name: transformers' DaViT reads a tensor's value (``.item()``) while it
        is built, which a build on the meta device cannot; the widths on meta are checked
        from a module built under ``torch.device("meta")`` (`test_published_widths.py`)."""
        with pytest.raises(ValueError, match="cannot be built lazily.*dispatch=True"):
            self.load(path, dispatch=False, attn_implementation="eager")
