"""`vlreg.analysis` on PaliGemma loaded for text. Every helper on each Gemma family's image
load, and what each refuses, is `AnalysisConformance` in ``test_conformance.py``."""

import torch

from vlreg import StandardizedTransformer, analysis
from vlreg.testing import build


def test_paligemmas_text_model_compares_on_its_text_load():
    """The text helpers that take text alone run on PaliGemma loaded for text (its image
    load refuses them: the processor takes no prompt without an image)."""
    text = StandardizedTransformer(str(build("paligemma")), dispatch=True, device="cpu", attn_implementation="eager")
    torch.testing.assert_close(analysis.compare_streams(text, text, "The quick brown fox"),
                               torch.ones(text.num_layers, dtype=torch.float64))
