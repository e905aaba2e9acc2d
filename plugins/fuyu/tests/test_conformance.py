"""Fuyu against vlreg's conformance suite."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.kit import chat


class TestFuyu(AnalysisConformance, VisionConformance):
    """No tower: the vision part is one linear map on each patch's pixels, its output what
    the wrapper scatters (no projector follows it); the processor writes the image's
    placeholders before the prompt's text, one image a prompt. Persimmon text blocks."""

    checkpoint = "fuyu"
    native = {
        "layers": "model.language_model.layers",
        "embed_tokens": "model.language_model.embed_tokens",
        "norm": "model.language_model.final_layernorm",
        "lm_head": "lm_head",
        "vision": "model.vision_embed_tokens",
    }
    tower_blocks = False
    has_projector = False
    analysis_refuses = {"tower_patterns": "has no blocks"}
    unavailable = {"vision.patch_embeddings": "Fuyu has no vision tower"}

    def image_prompt(self, model, images=1, question=None):
        """The chat prompt, which holds no placeholder (the processor writes one image's
        before the text); a placeholder written for each image past the first, so that the
        suite's prompts of several images are refused as they must be."""
        return model.processor.image_token * (images - 1) + chat(model, text=question or self.question)
