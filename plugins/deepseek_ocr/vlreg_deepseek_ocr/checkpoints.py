"""A tiny DeepSeek-OCR 2 for tests: random weights, through the real processor.

``DeepseekOcr2Processor`` over ``DeepseekOcr2ImageProcessor``, scaled down by 4 from the
published sizes so the model's fixed query tables still apply: the global view is 256
pixels (the published 1024), a local tile 192 (768), the SAM tower's patches 4 pixels (16),
so a global view is 64 x 64 patches, 16 x 16 after the tower's two stride-2 convolutions
(more than 144: the 256 ``query_1024_resolution`` queries), a tile 48 x 48, 12 x 12 (the 144
``query_768_resolution`` ones); the processor's ``patch_size`` 4 and ``downsample_ratio`` 4
count those tokens. SAM: 32 wide, 2 blocks of 2 heads, the first within 8 x 8 windows, the
second global; the query encoder (Qwen2 blocks) 32 wide, 2 blocks; the text model 64 wide,
a dense block then a block of 2 of 4 experts (softmax greedy routing) beside a shared expert.

The chat template is written after DeepSeek's plain turns (``<|User|>``, ``<|Assistant|>``),
each image as ``<image>`` and a newline; no published template was at hand, and nothing here
depends on more than the placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

BOS, EOS, PAD, IMAGE = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<image>"
TOKENS = (BOS, EOS, PAD, IMAGE, "<|User|>", "<|Assistant|>", "<|grounding|>")
CHAT_TEMPLATE = chat_template("<|{role}|>", "\n", IMAGE + "\n", bos=True)

#: The global view and a local tile, in pixels, and the processor's pixels per token side.
SIDE, TILE, PATCH_SIZE = 208, 156, 4
#: What the processor counts a view's tokens by: ``ceil(side / (patch_size * downsample_ratio))`` a side.
COUNTED_PATCH, DOWNSAMPLE = 13, 1

SAM = {
    "hidden_size": 32,
    "output_channels": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "mlp_dim": 64,
    "image_size": SIDE,
    "patch_size": PATCH_SIZE,
    "window_size": 8,
    "global_attn_indexes": [],  # a global block over 52 x 52 patches would cost most of a forward
    "downsample_channels": [32, 32],
    "initializer_range": 0.02,  # the default (1e-10) leaves the tower's weights all but zero
}
ENCODER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "num_key_value_heads": 2, "max_position_embeddings": 1024}
TEXT = {**TINY_TEXT, "num_key_value_heads": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"],
        "topk_method": "greedy", "routed_scaling_factor": 1.0, "max_position_embeddings": 2048}


def build_deepseek_ocr2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight DeepseekOcr2ForConditionalGeneration checkpoint to ``path``.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, ``image_processor`` (fields of
    DeepseekOcr2ImageProcessor: ``crop_to_patches``, ``max_patches``, ...), other fields of
    the top-level config."""
    from transformers import DeepseekOcr2Config, DeepseekOcr2ImageProcessor, DeepseekOcr2Processor

    images = {"size": {"height": SIDE, "width": SIDE}, "tile_size": TILE, **overrides.pop("image_processor", {})}
    vision = {"sam_config": SAM, "encoder_config": ENCODER}
    return tiny(
        path, DeepseekOcr2Config,
        lambda tok: DeepseekOcr2Processor(image_processor=DeepseekOcr2ImageProcessor(**images), tokenizer=tok,
                                          chat_template=CHAT_TEMPLATE, patch_size=COUNTED_PATCH,
                                          downsample_ratio=DOWNSAMPLE),
        tokens=TOKENS, roles={"bos_token": BOS, "eos_token": EOS, "pad_token": PAD},
        text={"model_type": "deepseek_ocr2_text", **TEXT}, vision=vision, ids={"image_token_id": IMAGE},
        overrides=overrides,
    )


BUILDERS = {"deepseek_ocr2": build_deepseek_ocr2}
