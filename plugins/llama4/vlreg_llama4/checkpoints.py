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

from vlreg.testing import TINY_TEXT, TINY_VISION, save, tokenizer

BEGIN, END_TEXT, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"
IMAGE_TOKENS = ("<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>", "<|tile_y_separator|>")
SPECIAL_TOKENS = (BEGIN, END_TEXT, PAD, *IMAGE_TOKENS, "<|header_start|>", "<|header_end|>", "<|eot|>")

#: Llama 4's turns: "<|header_start|>user<|header_end|>\n\n" + content + "<|eot|>", after a BOS.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|header_start|>' + message['role'] + '<|header_end|>\n\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '<|image|>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<|eot|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|header_start|>assistant<|header_end|>\n\n' }}{% endif %}"
)

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
    from transformers import GenerationConfig, Llama4Config, Llama4ImageProcessor, Llama4Processor

    tok = tokenizer(SPECIAL_TOKENS, bos_token=BEGIN, eos_token="<|eot|>", pad_token=PAD)
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    processor = Llama4Processor(
        image_processor=Llama4ImageProcessor(size={"height": TILE, "width": TILE}, max_patches=4),
        tokenizer=tok,
        patch_size=PATCH,
        pixel_shuffle_ratio=0.5,
        chat_template=CHAT_TEMPLATE,
    )
    special = {"bos_token_id": ids[BEGIN], "eos_token_id": ids["<|eot|>"], "pad_token_id": ids[PAD]}
    text = {"vocab_size": len(tok), **TEXT, **special, **overrides.pop("text_config", {})}
    vision = {**TOWER, **overrides.pop("vision_config", {})}
    config = Llama4Config(
        text_config=text, vision_config=vision, image_token_index=ids["<|patch|>"],
        boi_token_index=ids["<|image_start|>"], eoi_token_index=ids["<|image_end|>"], **overrides,
    )
    return save(Path(path), config, processor, GenerationConfig(**special), dtype=torch.bfloat16)


BUILDERS = {"llama4": build}
