"""Tiny DeepSeek-OCR 2 and Unlimited-OCR checkpoints for tests: random weights, through the
real processors.

DeepSeek-OCR 2 (``DeepseekOcr2Processor`` over ``DeepseekOcr2ImageProcessor``): the model picks
its query table by the view's patch count after SAM (256 ``query_1024_resolution`` queries
past 144 patches, else the 144 of ``query_768_resolution``), so the tiny views keep that
split: a 208-pixel global view is 52 x 52 SAM patches of 4 pixels, 13 x 13 after the two
stride-2 convolutions (169 patches: 256 queries), a 156-pixel tile 39 x 39, 10 x 10 (100: 144
queries). The processor counts a view's tokens as ``ceil(side / (patch_size *
downsample_ratio))`` squared, so it is given 13 and 1 (16 x 16 and 12 x 12). SAM: 32 wide, 2
blocks of 2 heads, both within 8 x 8 windows (a global block over 52 x 52 patches would cost
most of a forward); the query encoder (Qwen2 blocks) 32 wide, 2 blocks; the text model 64
wide, a dense block then 2 of 4 experts (softmax greedy routing) beside a shared expert.

Unlimited-OCR (`build_unlimited_ocr`): every patch after SAM's convolutions is a token, so
its sizes are plain: a 64-pixel global view (4 x 4 tokens), 48-pixel tiles (3 x 3).

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



#: Unlimited-OCR's global view and tile, in pixels (the published 1024 and 640, over 16).
UNLIMITED_SIDE, UNLIMITED_TILE = 64, 48
UNLIMITED_SAM = {**SAM, "image_size": UNLIMITED_SIDE, "window_size": 4}
#: The CLIP encoder: 32 wide (SAM's last channels), positions for a 4 x 4 grid (16 pixels in 4).
UNLIMITED_ENCODER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "image_size": 16, "patch_size": 4}


def build_unlimited_ocr(path: Path, **overrides: Any) -> Path:
    """Write a random-weight UnlimitedOcrForConditionalGeneration checkpoint to ``path``: a
    64-pixel global view (SAM's 16 x 16 patches, 4 x 4 after its convolutions, each row
    ended by a newline token), 48-pixel tiles (3 x 3), the CLIP encoder 2 blocks 32 wide;
    the text model DeepSeek-OCR 2's tiny one, its blocks under the reference sliding window.
    ``overrides`` as `build_deepseek_ocr2`'s."""
    from transformers import UnlimitedOcrConfig, UnlimitedOcrImageProcessor, UnlimitedOcrProcessor

    images = {"size": {"height": UNLIMITED_SIDE, "width": UNLIMITED_SIDE}, "tile_size": UNLIMITED_TILE,
              "maximum_pad_value": UNLIMITED_TILE, **overrides.pop("image_processor", {})}
    vision = {"sam_config": UNLIMITED_SAM, "encoder_config": UNLIMITED_ENCODER}
    text = {key: value for key, value in TEXT.items() if key != "topk_method"}
    return tiny(
        path, UnlimitedOcrConfig,
        lambda tok: UnlimitedOcrProcessor(image_processor=UnlimitedOcrImageProcessor(**images), tokenizer=tok,
                                          chat_template=CHAT_TEMPLATE, patch_size=PATCH_SIZE, downsample_ratio=4),
        tokens=TOKENS, roles={"bos_token": BOS, "eos_token": EOS, "pad_token": PAD},
        text={"model_type": "unlimited_ocr_text", **text, "sliding_window": 16}, vision=vision,
        ids={"image_token_id": IMAGE}, overrides=overrides,
    )


BUILDERS = {"deepseek_ocr2": build_deepseek_ocr2, "unlimited_ocr": build_unlimited_ocr}
