"""HunYuan-VL checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``HunYuanVLProcessor`` over its own image processor (16-pixel patches merged
2 x 2, so a token is 32 x 32 pixels); the tokenizer names the image placeholder and the marks
around it (``image_token``, ``image_start_token``, ``image_end_token``) and a padding token, as
the processor requires. The chat template is written in plain turns with each image as
``<image_start><image><image_end>``; no published template was at hand, and nothing here
depends on more than its placeholder and marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE, START, END = "<image>", "<image_start>", "<image_end>"
TOKENS = ("<pad>", "<s>", "</s>", START, END, IMAGE, "<image_newline>")
CHAT_TEMPLATE = chat_template("<|{role}|>", "</s>", f"{START}{IMAGE}{END}")

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 tokens of 32 pixels.
SIZE = {"shortest_edge": 64 * 64, "longest_edge": 160 * 160}


def build_hunyuan_vl(path: Path, **overrides: Any) -> Path:
    """Write a random-weight HunYuanVLForConditionalGeneration checkpoint to ``path``: a text
    model 64 wide, 2 blocks, 4 query heads over 2 key heads of 16 (queries and keys normed per
    head), M-RoPE; a tower 32 wide, 2 blocks of 2 heads, a learned 4 x 4 position grid.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import HunYuanVLConfig, HunYuanVLImageProcessor, HunYuanVLProcessor

    return tiny(
        path, HunYuanVLConfig,
        lambda tok: HunYuanVLProcessor(image_processor=HunYuanVLImageProcessor(size=SIZE), tokenizer=tok,
                                       chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "image_token": IMAGE,
                              "image_start_token": START, "image_end_token": END},
        text={**TINY_TEXT, "head_dim": 16,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "mrope_section": [2, 3, 3]}},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 16, "spatial_merge_size": 2, "max_image_size": 64, "min_image_size": 32,
                "out_hidden_size": TINY_TEXT["hidden_size"], "text_hidden_size": TINY_TEXT["hidden_size"]},
        ids={"image_token_id": IMAGE, "im_start_id": START, "im_end_id": END, "im_newline_id": "<image_newline>"},
        overrides=overrides,
    )
