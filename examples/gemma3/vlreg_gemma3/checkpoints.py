"""A tiny random-weight Gemma 3 checkpoint, written to disk and loaded like a real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vlreg.testing import CORPUS, tokenizer

BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"
TURN, END_TURN = "<start_of_turn>", "<end_of_turn>"
IMAGE_START, IMAGE_END, IMAGE = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
SPECIAL_TOKENS = (PAD, EOS, BOS, TURN, END_TURN, IMAGE_START, IMAGE_END, IMAGE)

#: Gemma 3's turn format. A system message has no turn of its own: its text opens the
#: first user turn. Each image is written as the begin-of-image token, which the
#: processor expands into the image's soft tokens between begin and end markers.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set preamble = namespace(text='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% set preamble.text = (message['content'] if message['content'] is string "
    "else message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('')) "
    "+ '\n\n' %}"
    "{% else %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    "{% if message['role'] == 'user' %}{{ preamble.text }}{% set preamble.text = '' %}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<start_of_image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

#: SigLIP sees 56 x 56 pixels as a 4 x 4 grid of 14-pixel patches; the projector
#: average-pools that grid to 2 x 2, so each image is 4 soft tokens.
IMAGE_SIZE, PATCH_SIZE, TOKENS_PER_IMAGE = 56, 14, 4


def build_gemma3(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Gemma3ForConditionalGeneration checkpoint to ``path``.

    Text 64 wide, 4 query heads over 2 KV heads of 16, scores scaled by
    ``query_pre_attn_scalar ** -0.5`` with a scalar that is not the head width (as on
    27B), two blocks: a sliding-window one (8 tokens, so a short prompt reaches past
    it), then a global one, as Gemma 3 alternates them. SigLIP 32 wide, two blocks, no
    pooling head (Gemma 3 pools in its projector). ``overrides``: ``text_config`` and
    ``vision_config`` dicts, other fields of the top-level config.

    Gemma 3 initialises its projection matrix to zeros, which would make every image
    the same to the text model; it is drawn at random here so images matter.
    """
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessor,
        Gemma3Processor,
        GenerationConfig,
    )

    path = Path(path)
    tok = tokenizer(
        SPECIAL_TOKENS,
        (*CORPUS, "user model user model"),
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        boi_token=IMAGE_START,
        eoi_token=IMAGE_END,
        image_token=IMAGE,
    )
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
        image_seq_length=TOKENS_PER_IMAGE,
    )
    tokens = {"pad_token_id": ids[PAD], "eos_token_id": ids[END_TURN], "bos_token_id": ids[BOS]}
    config = Gemma3Config(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "query_pre_attn_scalar": 32,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 8,
            "max_position_embeddings": 1024,
            **tokens,
            **overrides.pop("text_config", {}),
        },
        vision_config={
            "model_type": "siglip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "image_size": IMAGE_SIZE,
            "patch_size": PATCH_SIZE,
            "vision_use_head": False,
            **overrides.pop("vision_config", {}),
        },
        mm_tokens_per_image=TOKENS_PER_IMAGE,
        boi_token_index=ids[IMAGE_START],
        eoi_token_index=ids[IMAGE_END],
        image_token_index=ids[IMAGE],
        **overrides,
    )
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(std=0.1)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    generation = GenerationConfig(eos_token_id=[ids[END_TURN], ids[EOS]], pad_token_id=ids[PAD], bos_token_id=ids[BOS])
    generation.save_pretrained(path)
    return path
