"""A tiny random-weight VipLLaVA checkpoint, written to disk and loaded like a real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, tiny

TOKENS = ("<unk>", "<s>", "</s>", "<pad>", "<image>")

#: VipLLaVA's prompt: a fixed system line, then "###Human: <image>\n<text>###Assistant:"
#: (each image on its own line before the turn's text); a system message replaces the line.
SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
          "The assistant gives helpful, detailed, and polite answers to the human's questions.")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% set system = namespace(text='" + SYSTEM.replace("'", "\\'") + "') %}"
    "{% for message in messages if message['role'] == 'system' %}"
    "{% set system.text = message['content'] if message['content'] is string else "
    "message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(' ') %}"
    "{% endfor %}{{ system.text }}"
    "{% for message in messages if message['role'] != 'system' %}"
    "{{ '###Human: ' if message['role'] == 'user' else '###Assistant: ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] if item['type'] == 'image' %}<image>\n{% endfor %}"
    "{{ message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(' ') }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}###Assistant:{% endif %}"
)

#: CLIP sees 56 x 56 pixels as 4 x 4 patches of 14 after its class token.
IMAGE_SIZE, PATCH_SIZE = 56, 14


def build_vipllava(path: Path, **overrides: Any) -> Path:
    """Write a random-weight VipLlavaForConditionalGeneration checkpoint to ``path``: a CLIP
    tower of three blocks whose projector reads blocks 1 and 0 (``vision_feature_layer``
    [-2, 1]: the last block runs for nothing, as the real checkpoints' last does), a Llama
    text model 64 wide. ``overrides``: ``text_config`` and ``vision_config`` dicts, other
    fields of the top-level config."""
    from transformers import CLIPImageProcessor, LlavaProcessor, VipLlavaConfig

    images = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    return tiny(
        path, VipLlavaConfig,
        lambda tok: LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=PATCH_SIZE,
                                   vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                   chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"},
        text={"model_type": "llama", **TINY_TEXT},
        vision={"model_type": "clip_vision_model", **TINY_VISION, "num_hidden_layers": 3, "num_attention_heads": 4,
                "image_size": IMAGE_SIZE, "patch_size": PATCH_SIZE},
        ids={"image_token_index": "<image>"},
        fields={"image_seq_length": (IMAGE_SIZE // PATCH_SIZE) ** 2, "vision_feature_layer": [-2, 1]},
        overrides=overrides, special_at_root=True,
    )
