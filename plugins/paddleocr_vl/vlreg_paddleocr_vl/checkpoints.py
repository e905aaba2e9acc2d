"""PaddleOCR-VL checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``PaddleOCRVLProcessor`` over its own image processor (14-pixel patches merged
2 x 2, so a token is 28 x 28 pixels); the tokenizer names its image placeholder
(``image_token``), as the processor requires. The chat template is written in PaddleOCR-VL's
plain turns with each image as ``<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>``; no
published template was at hand, and nothing here depends on more than its placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE = "<|IMAGE_PLACEHOLDER|>"
TOKENS = ("<unk>", "<s>", "</s>", "<|IMAGE_START|>", "<|IMAGE_END|>", IMAGE, "<|video_pad|>")
CHAT_TEMPLATE = chat_template("{role}: ", "\n", f"<|IMAGE_START|>{IMAGE}<|IMAGE_END|>", bos=True)

#: Pixels the tiny processor resizes an image between: 2 x 2 to 6 x 6 tokens of 28 pixels.
SIZE = {"shortest_edge": 56 * 56, "longest_edge": 168 * 168}


def build_paddleocr_vl(path: Path, **overrides: Any) -> Path:
    """Write a random-weight PaddleOCRVLForConditionalGeneration checkpoint to ``path``: a text
    model 64 wide, 2 blocks, 4 query heads over 2 key heads of 16, M-RoPE sections [2, 3, 3];
    a tower 32 wide, 2 blocks of 2 heads, a learned 4 x 4 position grid. ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import PaddleOCRVLConfig, PaddleOCRVLImageProcessor, PaddleOCRVLProcessor

    return tiny(
        path, PaddleOCRVLConfig,
        lambda tok: PaddleOCRVLProcessor(image_processor=PaddleOCRVLImageProcessor(size=SIZE), tokenizer=tok,
                                         chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                              "image_token": IMAGE},
        text={**TINY_TEXT, "head_dim": 16,
              "rope_parameters": {"rope_type": "default", "rope_theta": 5e5, "mrope_section": [2, 3, 3]}},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 14, "image_size": 56, "spatial_merge_size": 2},
        ids={"image_token_id": IMAGE, "video_token_id": "<|video_pad|>", "vision_start_token_id": "<|IMAGE_START|>",
             "vision_end_token_id": "<|IMAGE_END|>"},
        overrides=overrides,
    )
