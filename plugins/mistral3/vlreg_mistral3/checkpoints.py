"""Tiny Mistral 3 and LightOnOCR checkpoints for tests: random weights, the real processors.

What a hub checkpoint holds, small: a tokenizer with Mistral's control tokens
(``<s>``, ``</s>``, ``[INST]``, ``[/INST]``) and Pixtral's image tokens (``[IMG]``,
``[IMG_BREAK]``, ``[IMG_END]``), the real ``PixtralProcessor`` with Pixtral's image
processor, a chat template in Mistral's ``[INST]`` format, a Mistral text model 64 wide
(4 query heads over 2 key/value heads) and a two-block Pixtral tower 32 wide with
8-pixel patches merged 2 x 2 into a token, so a token is 16 x 16 pixels. Images are
resized to a longest edge of 64 pixels: at most 4 x 4 tokens (8 x 8 patches) an image,
and images of different shapes are padded to the largest before the convolution.

`build_lighton_ocr` writes the tiny LightOnOCR checkpoint: a Qwen tokenizer's ChatML and
image tokens, the real ``LightOnOcrProcessor`` over Pixtral's image processor (patches of
the tower's 8 pixels, so an odd number of patches leaves a row or column no token covers,
as the published processor's 14-pixel patches do), and a chat template in the published
checkpoint's format, on a Qwen3 text model of the same widths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_LATENT_MOE, TINY_TEXT, TINY_VISION, tiny

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
TEXT = {**TINY_TEXT, "head_dim": 16, "sliding_window": None}
TOWER = {**TINY_VISION, "num_attention_heads": 4, "patch_size": PATCH, "image_size": LONGEST, "head_dim": 8}


def build_mistral3(path: Path, **overrides: Any) -> Path:
    """Write the tiny Mistral 3 checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import Mistral3Config, PixtralProcessor

    return tiny(
        path, Mistral3Config,
        lambda tok: PixtralProcessor(image_processor=_pixtral_images(), tokenizer=tok, patch_size=PATCH,
                                     spatial_merge_size=MERGE, chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"},
        text={"model_type": "mistral", **TEXT}, vision={"model_type": "pixtral", **TOWER},
        ids={"image_token_index": IMAGE}, fields={"spatial_merge_size": MERGE, "tie_word_embeddings": False},
        overrides=overrides,
    )


def _pixtral_images() -> Any:
    from transformers import PixtralImageProcessor

    return PixtralImageProcessor(size={"longest_edge": LONGEST}, patch_size={"height": PATCH, "width": PATCH})


#: LightOnOCR's image tokens are Qwen's, in Pixtral's three roles.
LIGHTON_ROLES = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>",
                 "image_end_token": "<|vision_end|>"}
LIGHTON_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *LIGHTON_ROLES.values())

#: LightOnOCR-1B's format (ChatML): an empty system turn where the conversation opens with
#: none; a turn's parts in order, each text followed by a line break, the image as its
#: placeholder; the turn closed by "<|im_end|>" on a line of its own.
LIGHTON_TEMPLATE = (
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

#: LightOnOCR's tiny Qwen3 text model: the tiny widths, heads of 16.
LIGHTON_TEXT = {**TINY_TEXT, "head_dim": 16}


def build_lighton_ocr(path: Path, **overrides: Any) -> Path:
    """Write the tiny LightOnOCR checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import LightOnOcrConfig, LightOnOcrProcessor

    return tiny(
        path, LightOnOcrConfig,
        lambda tok: LightOnOcrProcessor(image_processor=_pixtral_images(), tokenizer=tok, patch_size=PATCH,
                                        spatial_merge_size=MERGE, chat_template=LIGHTON_TEMPLATE),
        tokens=LIGHTON_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", **LIGHTON_ROLES},
        text={"model_type": "qwen3", **LIGHTON_TEXT}, vision={"model_type": "pixtral", **TOWER},
        ids={"image_token_id": "<|image_pad|>"}, fields={"spatial_merge_size": MERGE, "tie_word_embeddings": True},
        overrides=overrides,
    )


#: Mistral Large 4's tiny text model: latent attention with no query latent (`TINY_LATENT_MOE`'s
#: widths), three blocks: a dense one whose key-value latent block 1 reuses (block 1's indexer
#: reuses block 0's selection too), then a block without positions (``no_rope_layers``) that
#: builds its own; softmax routing among 4 experts in 2 groups; an indexer of 2 heads of 16
#: keeping 8 keys a query, so the selection bites on a prompt with an image.
LARGE4_TEXT = {
    **TINY_TEXT, **{k: v for k, v in TINY_LATENT_MOE.items() if k not in ("q_lora_rank", "norm_topk_prob")},
    "num_hidden_layers": 3, "no_rope_layers": [1, 1, 0], "kv_source_layers": [0, 0, 2],
    "indexer_types": ["full", "shared", "full"], "mlp_layer_types": ["dense", "sparse", "sparse"],
    "index_topk": 8, "index_head_dim": 16, "index_n_heads": 2, "final_logit_softcapping": 30.0,
}


def build_mistral_large4(path: Path, **overrides: Any) -> Path:
    """Write the tiny Mistral Large 4 checkpoint to ``path``: Mistral 3's tokenizer, processor,
    chat template and tower (see the module) over `LARGE4_TEXT`. ``overrides``: ``text_config``
    and ``vision_config`` dicts, other fields of the top-level config."""
    from transformers import MistralLarge4Config, PixtralProcessor

    return tiny(
        path, MistralLarge4Config,
        lambda tok: PixtralProcessor(image_processor=_pixtral_images(), tokenizer=tok, patch_size=PATCH,
                                     spatial_merge_size=MERGE, chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"},
        text={"model_type": "mistral_large4_text", **LARGE4_TEXT}, vision={"model_type": "pixtral", **TOWER},
        ids={"image_token_index": IMAGE}, fields={"spatial_merge_size": MERGE, "tie_word_embeddings": False},
        overrides=overrides,
    )


BUILDERS = {"mistral3": build_mistral3, "lighton_ocr": build_lighton_ocr, "mistral_large4": build_mistral_large4}
