"""Ovis 2 checkpoints for tests: a tiny one, random weights, through the real processor.

``Ovis2Processor`` over ``Ovis2ImageProcessor`` (crops off, its default), the image resized to
56 x 56: 16 patches of 14 pixels, folded 2 x 2 into 4 image tokens (``image_seq_length``). The
chat template is ChatML with ``<image>`` where an image goes, which the processor expands into
the structure tokens and ``<IMG_ATOM>`` runs; nothing here depends on more than that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

#: The structure tokens, in the order of the config's ``visual_indicator_token_ids``.
INDICATORS = ("<IMG_START>", "<IMG_GRID>", "<IMG_COL>", "<IMG_ROW>", "<IMG_END>")
TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<IMG_ATOM>", *INDICATORS)
CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<image>\n")


def build_ovis2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Ovis2ForConditionalGeneration checkpoint to ``path``: a Qwen2 text
    model 64 wide, 2 blocks, 4 query heads over 2 key heads; a tower 32 wide, 2 blocks, 2 heads,
    14-pixel patches at 56 x 56 folded 2 x 2; 32 visual words and the 5 structure tokens' rows.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import Ovis2Config, Ovis2ImageProcessor, Ovis2Processor

    return tiny(
        path, Ovis2Config,
        lambda tok: Ovis2Processor(image_processor=Ovis2ImageProcessor(size={"height": 56, "width": 56}),
                                   tokenizer=tok, chat_template=CHAT_TEMPLATE, image_seq_length=4),
        tokens=TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={"model_type": "qwen2", **TINY_TEXT},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 14, "image_size": 56, "hidden_stride": 2, "vocab_size": 32 + len(INDICATORS),
                "num_visual_indicator_tokens": len(INDICATORS)},
        ids={"image_token_id": "<IMG_ATOM>", "visual_indicator_token_ids": INDICATORS},
        fields={"hidden_size": TINY_TEXT["hidden_size"]}, overrides=overrides,
    )


#: Ovis 2.5's tokens: ChatML's, the placeholders Qwen's, and the image's and video's boundary
#: tokens, which the processor writes around each placeholder run and the model writes over
#: with the indicator rows of the visual vocabulary.
OVIS2_5_BOUNDS = ("<ovis_image_start>", "<ovis_image_end>", "<ovis_video_start>", "<ovis_video_end>")
OVIS2_5_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|image_pad|>", "<|video_pad|>", *OVIS2_5_BOUNDS)


def build_ovis2_5(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Ovis2_5ForConditionalGeneration checkpoint to ``path``
    (transformers 5.25): a Qwen3 text model 64 wide, 2 blocks, 4 query heads over 2 key heads;
    a tower 32 wide, 2 blocks, 2 heads, 16-pixel patches merged 2 x 2, a learned 4 x 4 position
    grid, 64-pixel windows (2 x 2 tokens: every picture the tests use spans several); 32 visual
    words and the 4 indicator rows. The processor is ``Ovis2_5Processor`` over its image and
    video processors, an image resized to between 32 x 32 and 128 x 128 pixels.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the config."""
    from transformers import Ovis2_5Config, Ovis2_5ImageProcessor, Ovis2_5Processor, Ovis2_5VideoProcessor

    pixels = {"size": {"shortest_edge": 32 * 32, "longest_edge": 128 * 128}}
    template = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<|image_pad|>", "<|video_pad|>")
    image_start, image_end, video_start, video_end = OVIS2_5_BOUNDS
    named = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": image_start,
             "image_end_token": image_end, "video_start_token": video_start, "video_end_token": video_end}
    return tiny(
        path, Ovis2_5Config,
        lambda tok: Ovis2_5Processor(image_processor=Ovis2_5ImageProcessor(**pixels), tokenizer=tok,
                                     video_processor=Ovis2_5VideoProcessor(**pixels), chat_template=template),
        tokens=OVIS2_5_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", **named},
        text={"model_type": "qwen3", **TINY_TEXT, "head_dim": 16},
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 16, "image_size": 64, "spatial_merge_size": 2, "window_size": 64,
                "vocab_size": 32 + 4, "num_visual_indicator_tokens": 4},
        ids={f"{name}_id": token for name, token in named.items()},
        overrides=overrides,
    )
