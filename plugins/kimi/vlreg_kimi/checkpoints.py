"""A tiny Kimi K2.5 for tests: random weights, through the real processor.

The processor is ``Kimi_K25Processor`` over Kimi's image and video processors, with a
tokenizer holding Kimi's special tokens, and a chat template written after Kimi K2's turns
(``<|im_user|>user<|im_middle|>...<|im_end|>``) with each image as
``<|media_begin|>image<|media_content|><|media_pad|><|media_end|>``, the shape the
processor writes a video's chunks in; no published template was at hand to check it
against, and nothing here depends on more than its placeholder. The text model is
DeepSeek-V3's, `TINY_LATENT_MOE`'s latent attention and experts; the tower 32 wide, 2
blocks of 2 heads, learned positions on a 4 x 4 grid, 14-pixel patches merged 2 x 2; images
at most 168 pixels a side (12 x 12 patches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_LATENT_MOE, TINY_TEXT, TINY_VISION, tiny

TOKENS = ("[EOS]", "[PAD]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
          "<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>", "<|kimi_k25_video_placeholder|>")

_CONTENT = (
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"
    "{% elif part['type'] == 'video' %}<|kimi_k25_video_placeholder|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
)
#: Kimi K2's turns: the role's token, the role's name, ``<|im_middle|>``, the content, ``<|im_end|>``.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_{{ message['role'] }}|>{{ message['role'] }}<|im_middle|>" + _CONTENT
    + "<|im_end|>{% endfor %}{% if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
)

#: How far the processor shrinks an image (it never enlarges one): at most 12 patches of 14
#: pixels a side (its ``size`` counts patches) and 144 patches in all.
MAX_SIDE, MAX_PATCHES = 12, 144


def build_kimi_k25(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Kimi_K25ForConditionalGeneration checkpoint to ``path``.
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config."""
    from transformers import Kimi_K25Config, Kimi_K25ImageProcessor, Kimi_K25Processor, Kimi_K25VideoProcessor

    size = {"max_height": MAX_SIDE, "max_width": MAX_SIDE}
    vision = {**TINY_VISION, "patch_size": 14, "pos_emb_height": 4, "pos_emb_width": 4, "pos_emb_time": 4,
              "merge_kernel_size": [2, 2], "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
    return tiny(
        path, Kimi_K25Config,
        lambda tok: Kimi_K25Processor(image_processor=Kimi_K25ImageProcessor(size=size, max_patches=MAX_PATCHES),
                                      video_processor=Kimi_K25VideoProcessor(size=size, do_sample_frames=False),
                                      tokenizer=tok,
                                      chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "[PAD]"},
        text={"model_type": "deepseek_v3", **TINY_TEXT, **TINY_LATENT_MOE},
        vision=vision,
        ids={"image_token_id": "<|media_pad|>", "video_token_id": "<|kimi_k25_video_placeholder|>",
             "vision_start_token_id": "<|media_begin|>", "vision_end_token_id": "<|media_end|>"},
        fields={"projection_hidden_size": vision["hidden_size"]},
        overrides=overrides,
    )
