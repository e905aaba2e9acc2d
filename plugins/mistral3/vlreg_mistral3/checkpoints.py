"""A tiny Mistral 3 checkpoint for tests: random weights, the real processor.

What a hub checkpoint holds, small: a tokenizer with Mistral's control tokens
(``<s>``, ``</s>``, ``[INST]``, ``[/INST]``) and Pixtral's image tokens (``[IMG]``,
``[IMG_BREAK]``, ``[IMG_END]``), the real ``PixtralProcessor`` with Pixtral's image
processor, a chat template in Mistral's ``[INST]`` format, a Mistral text model 64 wide
(4 query heads over 2 key/value heads) and a two-block Pixtral tower 32 wide with
8-pixel patches merged 2 x 2 into a token, so a token is 16 x 16 pixels. Images are
resized to a longest edge of 64 pixels: at most 4 x 4 tokens (8 x 8 patches) an image,
and images of different shapes are padded to the largest before the convolution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import save, tokenizer

IMAGE, BREAK, END = "[IMG]", "[IMG_BREAK]", "[IMG_END]"
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", IMAGE, BREAK, END, "[INST]", "[/INST]", "<pad>")

#: Mistral's turns: "<s>[INST]" + the user's content ([IMG] where an image goes) + "[/INST]",
#: then the assistant's reply and "</s>".
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST]' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '[IMG]' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{ '[/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}{{ eos_token }}"
    "{% endif %}{% endfor %}"
)

PATCH, MERGE, LONGEST = 8, 2, 64
TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 1024,
    "sliding_window": None,
}
TOWER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "patch_size": PATCH,
    "image_size": LONGEST,
    "head_dim": 8,
}


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny Mistral 3 checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import GenerationConfig, Mistral3Config, PixtralImageProcessor, PixtralProcessor

    tok = tokenizer(SPECIAL_TOKENS, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    processor = PixtralProcessor(
        image_processor=PixtralImageProcessor(size={"longest_edge": LONGEST}, patch_size={"height": PATCH, "width": PATCH}),
        tokenizer=tok,
        patch_size=PATCH,
        spatial_merge_size=MERGE,
        chat_template=CHAT_TEMPLATE,
    )
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]}
    text = {"model_type": "mistral", "vocab_size": len(tok), **TEXT, **special, **overrides.pop("text_config", {})}
    vision = {"model_type": "pixtral", **TOWER, **overrides.pop("vision_config", {})}
    config = Mistral3Config(
        text_config=text, vision_config=vision, image_token_index=ids[IMAGE], spatial_merge_size=MERGE,
        tie_word_embeddings=False, **overrides,
    )
    return save(Path(path), config, processor, GenerationConfig(**special))


BUILDERS = {"mistral3": build}
