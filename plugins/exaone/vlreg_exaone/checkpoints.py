"""EXAONE 4.5 checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Exaone4_5_Processor`` over Qwen2-VL's image and video processors, as the
published checkpoint's. The chat template is written in EXAONE's turns (``[|user|]``,
``[|assistant|]``, each ended by ``[|endofturn|]``) with each image as Qwen2-VL's
``<|vision_start|><|image_pad|><|vision_end|>``; no published template was at hand to check
it against, and nothing here depends on more than its placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

TOKENS = ("[PAD]", "[|endofturn|]", "[|system|]", "[|user|]", "[|assistant|]", "<|vision_start|>", "<|vision_end|>",
          "<|image_pad|>", "<|video_pad|>")
CHAT_TEMPLATE = chat_template("[|{role}|]\n", "[|endofturn|]\n", "<|vision_start|><|image_pad|><|vision_end|>",
                              "<|vision_start|><|video_pad|><|vision_end|>")

#: Pixels the tiny processor resizes an image between: 2 x 2 to 6 x 6 image tokens of 28 pixels.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 168 * 168
#: The tiny tower's window: 56 pixels, 2 x 2 merge blocks, so a 112 x 168 image (4 x 6 merge
#: blocks) has six windows.
WINDOW = 56


def build_exaone4_5(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Exaone4_5_ForConditionalGeneration checkpoint to ``path``: an
    EXAONE 4 text model 64 wide, 2 blocks (block 0 sliding-window, rotated; block 1 global,
    with no positions), 4 query heads over 2 key heads; a tower 32 wide, 2 blocks (block 1
    full attention, block 0 windowed), 4 query heads over 2 key heads. ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import Exaone4_5_Config, Exaone4_5_Processor, Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    pixels = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}
    return tiny(
        path, Exaone4_5_Config,
        lambda tok: Exaone4_5_Processor(image_processor=Qwen2VLImageProcessor(**pixels), tokenizer=tok,
                                        video_processor=Qwen2VLVideoProcessor(**pixels), chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "[|endofturn|]", "pad_token": "[PAD]"},
        text={"model_type": "exaone4", **TINY_TEXT, "sliding_window_pattern": 2, "sliding_window": 4096},
        vision={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4, "num_key_value_heads": 2,
                "out_hidden_size": TINY_TEXT["hidden_size"], "patch_size": 14, "spatial_merge_size": 2,
                "temporal_patch_size": 2, "window_size": WINDOW, "fullatt_block_indexes": [1]},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"},
        overrides=overrides,
    )
