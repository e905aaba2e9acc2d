"""A tiny Muse Glimmer for tests: random weights, through the real processor.

The processor is ``MuseGlimmerProcessor`` over Muse's image and video processors, with a
tokenizer holding its special tokens, and a chat template in ChatML's turns writing each
image as ``<|patch|>``, which the processor widens to ``<|image_start|>``, a ``<|patch|>``
per token, ``<|image_end|>``; no published template was at hand to check it against, and
nothing here depends on more than its placeholder. The text model is 64 wide, 2 blocks
(the last NoPE, full attention; the first rotated, sliding); the tower 32 wide, 2 blocks of
2 heads (the first windowed, the last full), learned positions on a 2 x 2 grid, so windows of
2 x 2 patches, 14-pixel patches merged 2 x 2; images at most 16 tokens (8 x 8 patches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tiny

TOKENS = ("<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>", "<|patch|>", "<|image_start|>", "<|image_end|>",
          "<|video|>", "<|vid_start|>", "<|vid_end|>", "<|vid_frame_separator|>")

CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<|patch|>", "<|video|>")

#: The processor's cap on an image's tokens (it resizes to the closest grid of 28-pixel squares
#: under it, enlarging as well as shrinking).
MAX_TOKENS = 16


def build_muse_glimmer(path: Path, **overrides: Any) -> Path:
    """Write a random-weight MuseGlimmerForConditionalGeneration checkpoint to ``path``.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config."""
    from transformers import (MuseGlimmerConfig, MuseGlimmerImageProcessor, MuseGlimmerProcessor,
                              MuseGlimmerVideoProcessor)

    vision = {**TINY_VISION, "patch_size": 14, "pos_emb_height": 2, "pos_emb_width": 2, "merge_size": 2,
              "max_position_embeddings": 4, "layer_types": ["window_attention", "full_attention"],
              "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
    text = {**TINY_TEXT, "head_dim": 16, "sliding_window": 8, "final_logit_softcapping": 2.0,
            "output_multiplier": 0.5, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    return tiny(
        path, MuseGlimmerConfig,
        lambda tok: MuseGlimmerProcessor(image_processor=MuseGlimmerImageProcessor(max_image_tokens=MAX_TOKENS),
                                         video_processor=MuseGlimmerVideoProcessor(), tokenizer=tok,
                                         chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|pad|>"},
        text={"model_type": "muse_glimmer_text", **text},
        vision=vision,
        ids={"image_token_id": "<|patch|>", "video_token_id": "<|video|>"},
        fields={"out_hidden_size": 4 * vision["hidden_size"], "projector_hidden_size": 48},
        overrides=overrides,
    )
