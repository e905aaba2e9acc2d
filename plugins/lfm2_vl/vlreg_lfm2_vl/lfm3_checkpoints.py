"""LFM3-VL checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Lfm3VlProcessor`` (Qwen3-VL's: an image's ``<|image_pad|>`` expanded to one
per merge block of ``image_grid_thw``, a video's to its frames' tokens, each temporal patch
after its time, ``<1.0 seconds>``, between ``<|vision_start|>`` and ``<|vision_end|>``) over
``Qwen2VLImageProcessor`` and ``Qwen3VLVideoProcessor``, as transformers maps ``lfm3_vl``.
The chat template is LFM2-VL's format (``<|startoftext|>``, ChatML turns) with each image as
``<|vision_start|><|image_pad|><|vision_end|>`` and each video as ``<|video_pad|>`` (the
processor writes a video's markers per frame); no published LFM3-VL template was at hand to
check it against, and nothing here depends on more than its placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

from .checkpoints import BOS, END, EOS, PAD, ROLES, TURN

IMAGE, VIDEO, START, STOP = "<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"
TOKENS = (PAD, BOS, EOS, TURN, END, IMAGE, VIDEO, START, STOP)
CHAT_TEMPLATE = chat_template(f"{TURN}{{role}}\n", f"{END}\n", f"{START}{IMAGE}{STOP}", VIDEO, bos=True)

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 image tokens of 32 pixels.
MIN_PIXELS, MAX_PIXELS = 64 * 64, 160 * 160
SIZES = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2,
         "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}}

#: Three blocks, one of each kind: a short convolution, sliding-window attention, full attention.
TEXT = {"model_type": "lfm3", **TINY_TEXT, "num_hidden_layers": 3, "head_dim": 16, "sliding_window": 8,
        "layer_types": ["conv", "sliding_attention", "full_attention"]}
#: Two blocks: the 2-D convolution, then attention (4 query heads over 2 key heads).
TOWER = {"model_type": "lfm3_vl_vision", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "layer_types": ["conv", "full_attention"],
         "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}


def build_lfm3_vl(path: Path, **overrides: Any) -> Path:
    """Write a tiny LFM3-VL checkpoint. ``overrides``: ``text_config`` and ``vision_config``
    dicts, other fields of the top-level config."""
    from transformers import Lfm3VlConfig, Lfm3VlProcessor, Qwen2VLImageProcessor, Qwen3VLVideoProcessor

    return tiny(
        path, Lfm3VlConfig,
        lambda tok: Lfm3VlProcessor(image_processor=Qwen2VLImageProcessor(**SIZES), tokenizer=tok,
                                    video_processor=Qwen3VLVideoProcessor(**SIZES), chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles=ROLES, stops={**ROLES, "eos_token": END}, text=TEXT, vision=TOWER,
        ids={"image_token_id": IMAGE, "video_token_id": VIDEO, "vision_start_token_id": START,
             "vision_end_token_id": STOP},
        fields={"projector_hidden_size": 64}, overrides=overrides,
    )
