"""Florence-2 against the conformance suite the core ships.

Florence-2 has no chat template: a prompt is a task token (``<CAPTION>``) or plain text,
which the processor rewrites and wraps (`image_prompt`, `text_prompt`). The image's
features enter the encoder's input embeddings (`VisionConformance.entry`); the blocks are
post-norm (the suite checks `vlreg.core.seq2seq.post_norm_output`); DaViT's blocks are
not served, so the tower is checked as one without blocks."""

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
    image_sizes = ((40, 30), (32, 32))

    def image_prompt(self, model, images=1, question=None):
        return "<CAPTION>"

    def text_prompt(self, model, text=None, generation=True):
        return text or self.text
