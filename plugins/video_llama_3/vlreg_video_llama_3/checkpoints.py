"""VideoLLaMA 3 checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``VideoLlama3Processor`` over its own image processor (14-pixel patches, a
token a patch) and video processor (2 x 2 patches a token, token compression on), with
Qwen2-VL's tokens and chat format, which its placeholders are (``<|image_pad|>``,
``<|video_pad|>``); no published template was at hand, and nothing here depends on more
than its placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, tiny
from vlreg_qwen2_vl.checkpoints import CHAT_TEMPLATE, SPECIAL_TOKENS

#: Pixels the tiny image processor resizes an image between: 4 x 4 to 8 x 8 tokens of 14 pixels.
IMAGE_SIZE = {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}
#: The tiny video processor's: 2 x 2 to 4 x 4 tokens of 28 pixels a frame.
VIDEO_SIZE = {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}


def build_video_llama_3(path: Path, **overrides: Any) -> Path:
    """Write a random-weight VideoLlama3ForConditionalGeneration checkpoint to ``path``: a Qwen2
    text model 64 wide, 2 blocks, 4 query heads over 2 key heads; a tower 32 wide, 2 blocks of
    2 heads on 14-pixel patches. ``overrides``: ``text_config`` and ``vision_config`` dicts,
    other fields of the config."""
    from transformers import VideoLlama3Config, VideoLlama3ImageProcessor, VideoLlama3Processor
    from transformers.models.video_llama_3.video_processing_video_llama_3 import VideoLlama3VideoProcessor

    return tiny(
        path, VideoLlama3Config,
        lambda tok: VideoLlama3Processor(image_processor=VideoLlama3ImageProcessor(size=IMAGE_SIZE), tokenizer=tok,
                                         video_processor=VideoLlama3VideoProcessor(size=VIDEO_SIZE),
                                         chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={"model_type": "qwen2", **TINY_TEXT},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 14},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"},
        overrides=overrides,
    )
