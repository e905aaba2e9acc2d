"""HyperCLOVA X SEED Vision checkpoints for tests: a tiny one, random weights, through the real
processor (``HyperCLOVAXVisionV2Processor`` over Qwen2-VL's image and video processors, as
transformers maps the type).

The chat template is written in ChatML turns with each image as Qwen's
``<|vision_start|><|image_pad|><|vision_end|>``; no published template was at hand to check it
against, and nothing here depends on more than its placeholders. The µP multipliers are set
away from 1 (embeddings times 2, each sublayer's output times 0.5, logits times 0.25) so that
a rule that forgot one would show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
          "<|video_pad|>")
CHAT_TEMPLATE = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<|vision_start|><|image_pad|><|vision_end|>",
                              "<|vision_start|><|video_pad|><|vision_end|>")

#: Pixels the tiny processor resizes an image between: 2 x 2 to 6 x 6 image tokens of 28 pixels.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 168 * 168
#: The µP multipliers of the tiny text model.
MULTIPLIERS = {"embedding_multiplier": 2.0, "residual_multiplier": 0.5, "logits_scaling": 0.25,
               "attention_multiplier": 0.2}


def build_hyperclovax_vision_v2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight HyperCLOVAXVisionV2ForConditionalGeneration checkpoint to ``path``:
    a HyperCLOVA X text model 64 wide, 2 blocks with post-norms, 4 query heads over 2 key heads,
    the `MULTIPLIERS`; Qwen2.5-VL's tower 32 wide, 2 blocks (block 1 full attention, block 0
    windowed, 56-pixel windows), its merger 48 wide, the projector 48 to 64. ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import HyperCLOVAXVisionV2Config, HyperCLOVAXVisionV2Processor, Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    pixels = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}
    return tiny(
        path, HyperCLOVAXVisionV2Config,
        lambda tok: HyperCLOVAXVisionV2Processor(
            image_processor=Qwen2VLImageProcessor(**pixels), tokenizer=tok,
            video_processor=Qwen2VLVideoProcessor(**pixels), chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={"model_type": "hyperclovax", **TINY_TEXT, **MULTIPLIERS},
        vision={"model_type": "qwen2_5_vl_vision", "depth": 2, "hidden_size": 32, "intermediate_size": 64,
                "num_heads": 4, "out_hidden_size": 48, "patch_size": 14, "spatial_merge_size": 2,
                "temporal_patch_size": 2, "window_size": 56, "fullatt_block_indexes": [1]},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"},
        overrides=overrides,
    )
