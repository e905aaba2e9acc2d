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
#: Muse Spark's, with its audio placeholders.
SPARK_TOKENS = (*TOKENS, "<|audio|>", "<|soft_audio_start|>", "<|soft_audio_end|>")

CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<|patch|>", "<|video|>")

#: The processor's cap on an image's tokens (it resizes to the closest grid of 28-pixel squares
#: under it, enlarging as well as shrinking).
MAX_TOKENS = 16


#: The tower both share: 32 wide, 2 blocks (one windowed, one full), a 2 x 2 position grid.
VISION = {**TINY_VISION, "patch_size": 14, "pos_emb_height": 2, "pos_emb_width": 2, "merge_size": 2,
          "max_position_embeddings": 4, "layer_types": ["window_attention", "full_attention"],
          "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
#: The text both share: 64 wide, 2 blocks (sliding and rotated, then full and NoPE).
TEXT = {**TINY_TEXT, "head_dim": 16, "sliding_window": 8, "final_logit_softcapping": 2.0, "output_multiplier": 0.5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def build_muse_glimmer(path: Path, **overrides: Any) -> Path:
    """Write a random-weight MuseGlimmerForConditionalGeneration checkpoint to ``path``.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config."""
    from transformers import (MuseGlimmerConfig, MuseGlimmerImageProcessor, MuseGlimmerProcessor,
                              MuseGlimmerVideoProcessor)

    return tiny(
        path, MuseGlimmerConfig,
        lambda tok: MuseGlimmerProcessor(image_processor=MuseGlimmerImageProcessor(max_image_tokens=MAX_TOKENS),
                                         video_processor=MuseGlimmerVideoProcessor(), tokenizer=tok,
                                         chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|pad|>"},
        text={"model_type": "muse_glimmer_text", **TEXT},
        vision=VISION,
        ids={"image_token_id": "<|patch|>", "video_token_id": "<|video|>"},
        fields={"out_hidden_size": 4 * VISION["hidden_size"], "projector_hidden_size": 48},
        overrides=overrides,
    )


def build_muse_spark(path: Path, **overrides: Any) -> Path:
    """Write a random-weight MuseSparkForConditionalGeneration checkpoint to ``path``: Glimmer's
    tiny shape, its first block's MLP dense, its second's 4 experts (2 a token) in a 32-wide
    space between ``pre_expert_proj`` and ``post_expert_proj``, and a two-stage audio encoder
    (4 samples a token) with ``MuseSparkFeatureExtractor`` beside the processors.
    ``overrides`` as `build_muse_glimmer`'s."""
    from transformers import (MuseGlimmerImageProcessor, MuseGlimmerVideoProcessor, MuseSparkConfig,
                              MuseSparkFeatureExtractor, MuseSparkProcessor)

    text = {**TEXT, "mlp_layer_types": ["dense", "sparse"], "moe_hidden_size": 32, "moe_intermediate_size": 16,
            "num_local_experts": 4, "num_experts_per_tok": 2}
    audio = {"patch_sizes": [2, 2], "hidden_sizes": [16, 32], "depths": [1, 1], "num_hidden_layers": 2,
             "out_hidden_size": TEXT["hidden_size"]}
    return tiny(
        path, MuseSparkConfig,
        lambda tok: MuseSparkProcessor(image_processor=MuseGlimmerImageProcessor(max_image_tokens=MAX_TOKENS),
                                       video_processor=MuseGlimmerVideoProcessor(), tokenizer=tok,
                                       feature_extractor=MuseSparkFeatureExtractor(samples_per_token=4),
                                       chat_template=CHAT_TEMPLATE),
        tokens=SPARK_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|pad|>"},
        text={"model_type": "muse_spark_text", **text},
        vision={**VISION, "model_type": "muse_spark_vision"},
        ids={"image_token_id": "<|patch|>", "video_token_id": "<|video|>", "audio_token_id": "<|audio|>"},
        fields={"out_hidden_size": 4 * VISION["hidden_size"], "projector_hidden_size": 48, "audio_config": audio},
        overrides=overrides,
    )
