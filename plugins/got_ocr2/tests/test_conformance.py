"""GOT-OCR 2.0 and PP-Chart2Table against the conformance suite the core ships.

Both processors take no prompt without an image, so the suite's text prompt carries one
(``text_images``), and a text-only load's prompt is the tokenizer's encoding. transformers
runs GotOcr2 under eager attention only. The tiny tower's first block attends within windows
and its interior is refused by name (`vlreg_got_ocr2.vision.WINDOWED`); its second block,
global, serves it."""

from vlreg.testing.conformance import AnalysisConformance, VisionConformance
from vlreg.testing.conformance.native import composite

#: GOT-OCR 2's SAM-style tower; its first block windowed, the second global.
NATIVE = composite({
    "layers": "layers",
    "patch_embed": "patch_embed",
    "layers.0.self_attn": "layers.0.attn",
    "layers.0.mlp": "layers.0.mlp",
    "layers.0.input_layernorm": "layers.0.layer_norm1",
    "layers.1.post_attention_layernorm": "layers.1.layer_norm2",
})
WINDOWED = {f"vision.layers.0.self_attn.{name}": "attends within 6 x 6-patch windows" for name in (
    "attention_queries", "attention_keys", "attention_values", "attention_scores", "attention_probabilities",
    "attention_head_outputs")}


class TestGotOcr2(AnalysisConformance, VisionConformance):
    """A 112 x 84 image squeezed onto the 32-pixel crop: 16 x 16 patches, 4 x 4 tokens."""

    checkpoint = "got_ocr2"
    native = NATIVE
    unavailable = WINDOWED
    text_images = 1
    supports_sdpa = False
    analysis_refuses = {"compare_streams": "no prompt without an image"}  # the processor takes no text-only prompt


class TestPPChart2Table(TestGotOcr2):
    """The same model under PP-Chart2Table's config, processor and template."""

    checkpoint = "pp_chart2table"
