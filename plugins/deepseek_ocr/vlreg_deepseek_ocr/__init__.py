"""vlreg-deepseek-ocr: DeepSeek-OCR 2 (``deepseek_ocr2``), declared against `vlreg.plugin`.

``DeepseekOcr2ForConditionalGeneration`` is LLaVA-NeXT's layout: the tower at
``model.vision_tower`` (`vision`: SAM's ViT, then a query encoder of Qwen2 blocks whose
learned queries are the image's tokens), the projector at ``model.multi_modal_projector``
(one linear layer), the text model at ``model.language_model`` (`text`: DeepSeek-V2's blocks
with Llama's attention and, past the dense ones, DeepSeek-V2's softmax-routed experts beside
shared experts). ``model``'s forward writes each image's features at its first
``inputs_embeds.masked_scatter``: its local tiles' projected queries, its global view's, then
the learned ``model.view_separator`` row, so ``projector.output`` is not the features.
`geometry` declares the grids; `checkpoints` builds tiny checkpoints for tests.

Unlimited-OCR (``unlimited_ocr``: `vision.SamClipVision`, `geometry.unlimited_image_grids`) is DeepSeek-OCR (v1)'s shape over DeepSeek-OCR
2's classes: SAM then a CLIP encoder whose every patch is a token, rows ended by the learned
``image_newline``; the same text blocks under a reference sliding window.
"""

from vlreg.plugin import Plugin, Text, Tower, Wrapper

from . import text, vision
from .geometry import image_grids, unlimited_image_grids


def builders():
    from .checkpoints import BUILDERS

    return BUILDERS


plugin = Plugin(
    Wrapper("deepseek_ocr2", envoys=vision.wrapper_envoys, refuses=vision.LOCAL_VIEWS,
            image_grids=lambda part: image_grids),
    Tower("deepseek_ocr2_vision", rename=vision.RENAME, envoys=vision.envoys),
    Text("deepseek_ocr2_text", envoys=text.envoys),
    Wrapper("unlimited_ocr", envoys=vision.wrapper_envoys, refuses=vision.LOCAL_VIEWS,
            image_grids=lambda part: unlimited_image_grids),
    Tower("unlimited_ocr_vision", rename=vision.UNLIMITED_RENAME, envoys=vision.unlimited_envoys),
    Text("unlimited_ocr_text", envoys=text.unlimited_envoys),
    checkpoints=builders,
)
