"""A tiny Llama 4 checkpoint for tests: random weights, the real processor.

What a hub checkpoint holds, small: a tokenizer with Llama 4's header, turn and image
tokens, the real ``Llama4Processor`` with its image processor cutting 32-pixel tiles (at
most 4 a image, and a global image where there are several), a chat template in Llama
4's ``<|header_start|>`` format, and the wrapper's config: a text model 64 wide (4 query
heads of 16 over 2 key/value heads) whose four blocks alternate a dense MLP and a
mixture of 4 experts, 2 a token, beside a shared expert (``interleave_moe_layer_step=2``,
as Llama 4 Maverick's; block 3 uses no rotary embedding, as every fourth does), and a
two-block tower 32 wide with 8-pixel patches, so a tile is 4 x 4 patches plus the class
token, shuffled into 2 x 2 tokens of 2 x 2 patches. The weights are bfloat16, as Llama 4's
are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tiny

BEGIN, END_TEXT, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"
IMAGE_TOKENS = ("<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>", "<|tile_y_separator|>")
SPECIAL_TOKENS = (BEGIN, END_TEXT, PAD, *IMAGE_TOKENS, "<|header_start|>", "<|header_end|>", "<|eot|>")

#: Llama 4's turns: "<|header_start|>user<|header_end|>\n\n" + content + "<|eot|>", after a BOS.
CHAT_TEMPLATE = chat_template("<|header_start|>{role}<|header_end|>\n\n", "<|eot|>", "<|image|>", bos=True)

PATCH, TILE = 8, 32
TEXT = {
    **TINY_TEXT,
    "intermediate_size": 32,  # an expert's
    "intermediate_size_mlp": 128,
    "num_hidden_layers": 4,
    "head_dim": 16,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "interleave_moe_layer_step": 2,
    "attention_chunk_size": 1024,
}
TOWER = {
    **TINY_VISION,
    "intermediate_size": 128,  # the pixel shuffle's width: 2 x 2 patches of 32
    "num_attention_heads": 4,
    "patch_size": PATCH,
    "image_size": TILE,
    "pixel_shuffle_ratio": 0.5,
    "projector_input_dim": 64,
    "projector_output_dim": 64,
    "vision_output_dim": 64,
}


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny Llama 4 checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    import torch
    from transformers import Llama4Config, Llama4ImageProcessor, Llama4Processor

    images = Llama4ImageProcessor(size={"height": TILE, "width": TILE}, max_patches=4)
    return tiny(
        path, Llama4Config,
        lambda tok: Llama4Processor(image_processor=images, tokenizer=tok, patch_size=PATCH, pixel_shuffle_ratio=0.5,
                                    chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={"bos_token": BEGIN, "eos_token": "<|eot|>", "pad_token": PAD}, text=TEXT,
        vision=TOWER, ids={"image_token_index": "<|patch|>", "boi_token_index": "<|image_start|>",
                           "eoi_token_index": "<|image_end|>"},
        overrides=overrides, dtype=torch.bfloat16,
    )


BUILDERS = {"llama4": build}
