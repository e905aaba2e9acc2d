"""Cosmos3 Edge checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Cosmos3EdgeProcessor`` over its own image and video processors (16-pixel
patches merged 2 x 2, so a token is 32 x 32 pixels), with Qwen2-VL's tokens and chat format,
which its processor's placeholders are (``<|image_pad|>``, ``<|video_pad|>``, the vision
markers). The video processor takes every frame it is given (no sampling by fps).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, tiny
from vlreg_qwen2_vl.checkpoints import CHAT_TEMPLATE, SPECIAL_TOKENS

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 tokens of 32 pixels.
SIZE = {"shortest_edge": 64 * 64, "longest_edge": 160 * 160}


def build_cosmos3_edge(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Cosmos3EdgeForConditionalGeneration checkpoint to ``path``: a
    text model 64 wide, 2 blocks, 4 query heads over 2 key heads of 16, M-RoPE sections
    [2, 3, 3]; a tower 32 wide, 2 blocks of 2 heads, a learned 4 x 4 grid of positions.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import Cosmos3EdgeConfig, Cosmos3EdgeImageProcessor, Cosmos3EdgeProcessor
    from transformers.models.cosmos3_edge.video_processing_cosmos3_edge import Cosmos3EdgeVideoProcessor

    return tiny(
        path, Cosmos3EdgeConfig,
        lambda tok: Cosmos3EdgeProcessor(image_processor=Cosmos3EdgeImageProcessor(size=SIZE), tokenizer=tok,
                                         video_processor=Cosmos3EdgeVideoProcessor(size=SIZE, do_sample_frames=False),
                                         chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={**TINY_TEXT, "head_dim": 16,
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 16, "num_patches": 16, "spatial_merge_size": 2},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>",
             "vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>"},
        fields={"projector_hidden_size": 64},
        overrides=overrides,
    )
