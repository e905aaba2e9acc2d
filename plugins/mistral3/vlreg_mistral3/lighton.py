"""LightOnOCR (``LightOnOcrForConditionalGeneration``): this plugin's Pixtral tower on a
Qwen3 text model (served by vlreg-text's ``qwen3`` text part).

The wrapper's ``model`` holds the tower at ``vision_encoder``, the projector at
``vision_projection`` (an RMS norm, Mistral 3's patch merger: each 2 x 2 block of an
image's patches into one token, then two linear maps) and the text model at
``language_model``; its forward writes the features in with ``inputs_embeds.masked_scatter``.
Unlike Mistral 3 the projector reads the tower's ``last_hidden_state``, so every tower value
takes a write, and the prompt holds only ``<|image_pad|>`` tokens, ``rows x columns`` an
image (no row breaks): the same grids, `geometry.pixtral_image_grids` at the spatial merge.

`build` writes the tiny checkpoint the tests load: a Qwen tokenizer's ChatML and image
tokens, the real ``LightOnOcrProcessor`` over Pixtral's image processor (patches of the
tower's 8 pixels, so an odd number of patches leaves a row or column no token covers, as
the published processor's 14-pixel patches do), and a chat template in the published
checkpoint's format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import save, tokenizer

from .checkpoints import LONGEST, MERGE, PATCH, TOWER

RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_encoder": "vision",
    "model.vision_projection": "projector",
}

ROLES = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>", "image_end_token": "<|vision_end|>"}
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *ROLES.values())

#: LightOnOCR-1B's format (ChatML): an empty system turn where the conversation opens with
#: none; a turn's parts in order, each text followed by a line break, the image as its
#: placeholder; the turn closed by "<|im_end|>" on a line of its own.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}{{ '<|im_start|>system<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] + '<|im_end|>\\n' }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}{{ '<|image_pad|>' }}"
    "{% elif 'text' in part %}{{ part['text'] + '\\n' }}{% endif %}"
    "{% endfor %}{{ '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 1024,
}


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny LightOnOCR checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import GenerationConfig, LightOnOcrConfig, LightOnOcrProcessor, PixtralImageProcessor

    tok = tokenizer(SPECIAL_TOKENS, eos_token="<|im_end|>", pad_token="<|endoftext|>", **ROLES)
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    processor = LightOnOcrProcessor(
        image_processor=PixtralImageProcessor(size={"longest_edge": LONGEST}, patch_size={"height": PATCH, "width": PATCH}),
        tokenizer=tok,
        patch_size=PATCH,
        spatial_merge_size=MERGE,
        chat_template=CHAT_TEMPLATE,
    )
    special = {"bos_token_id": None, "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"]}
    text = {"model_type": "qwen3", "vocab_size": len(tok), **TEXT, **special, **overrides.pop("text_config", {})}
    vision = {"model_type": "pixtral", **TOWER, **overrides.pop("vision_config", {})}
    config = LightOnOcrConfig(
        text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"], spatial_merge_size=MERGE,
        tie_word_embeddings=True, **overrides,
    )
    generation = GenerationConfig(eos_token_id=special["eos_token_id"], pad_token_id=special["pad_token_id"])
    return save(Path(path), config, processor, generation)
