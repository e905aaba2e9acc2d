"""GIT against the conformance suite the core ships.

GIT has no chat template and no image placeholder: a prompt is plain text (the processor
writes ``[CLS]`` before it and ``[SEP]`` after), and the model puts the image's tokens
before it (`vlreg.plugin.Prefix`). Its blocks are BERT's, post-norm; transformers runs them
with eager attention only."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance

NATIVE = {
    "layers": "git.encoder.layer",
    "embed_tokens": "git.embeddings.word_embeddings",
    "lm_head": "output",
    "layers.0.self_attn": "git.encoder.layer.0.attention",
    "layers.0.self_attn.o_proj": "git.encoder.layer.0.attention.output.dense",
    "layers.0.mlp": "git.encoder.layer.0.output.dense",
    "layers.1.final_layer_norm": "git.encoder.layer.1.output.LayerNorm",
    "vision": "git.image_encoder",
    "vision.layers": "git.image_encoder.vision_model.encoder.layers",
    "vision.patch_embed": "git.image_encoder.vision_model.embeddings.patch_embedding",
    "vision.norm": "git.image_encoder.vision_model.post_layernorm",
    "projector": "git.visual_projection",
}


class TestGit(AnalysisConformance, VisionConformance):
    checkpoint = "git"
    native = NATIVE
    plain_sum = False
    o_proj = "o_proj"
    supports_sdpa = False

    def image_prompt(self, model, images=1, question=None):
        """Plain text: GIT reads one image a prompt, before it."""
        return question or self.question

    def text_prompt(self, model, text=None, generation=True):
        return text or self.text
