"""Janus checkpoints for tests: tiny random-weight ones, written as a hub checkpoint is.

Each builder writes the config, random weights, a tokenizer with Janus's (DeepSeek's)
special tokens, which adds ``<｜begin▁of▁sentence｜>`` before every text as DeepSeek's
does, the real ``JanusProcessor`` with ``JanusImageProcessor`` (the image resized to a
longer side of `IMAGE_SIZE` and padded to a square) and Janus's chat template
(``<|User|>: ...`` and ``<|Assistant|>:`` turns, each image part as ``<image_placeholder>``
on a line of its own):

* ``janus``: the tower, the aligner and the Llama text model (served by vlreg-llava's
  claim), and a small VQ model, which only image generation uses; the processor adds no
  system prompt (``JanusProcessor``'s default);
* ``janus_pro``: the same model with the processor as the published Janus-Pro
  checkpoints set it, ``use_default_system_prompt=True``: the processor writes its
  default system prompt before every text a trace gives it (a text-only load, with no
  processor, does not).

* ``deepseek_vl``: DeepSeek-VL (DeepseekVLForConditionalGeneration), the same understanding
  path without a VQ model: transformers' SigLIP tower (``siglip_vision_model``, served by
  vlreg-llava, its attention-pooling head on as in SiglipVisionConfig's default), the
  two-layer aligner, a Llama text model with tied embeddings, the real
  ``DeepseekVLProcessor`` with ``DeepseekVLImageProcessor`` (Janus's resize and pad) and
  DeepSeek-VL's chat format (a fixed system text, then ``User: `` and ``Assistant:``
  turns, each image part as ``<image_placeholder>`` in line).

The tiny tower sees 56 x 56 images in 7-pixel patches: 8 x 8 = 64 tokens an image, one a
patch (Janus-Pro and DeepSeek-VL: 384 pixels, 16-pixel patches, 576 tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, tiny

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"
IMAGE, IMAGE_START, IMAGE_END = "<image_placeholder>", "<begin_of_image>", "<end_of_image>"
SPECIAL_TOKENS = (BOS, EOS, PAD, IMAGE, "<patch_placeholder>", "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>",
                  "<|grounding|>", "<|User|>", "<|Assistant|>", IMAGE_START, IMAGE_END)
#: The roles JanusProcessor reads off the tokenizer (``image_token``, ``boi_token``, ``eoi_token``).
ROLES = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "image_token": IMAGE, "boi_token": IMAGE_START,
         "eoi_token": IMAGE_END}

#: Janus's format: ``<|User|>: `` and the turn's parts (an image as the placeholder, with a
#: newline between it and a neighbouring part; texts stripped, two texts joined by a
#: space), a user turn closed by a blank line and an assistant's by the end-of-sentence
#: token; the generation prompt is ``<|Assistant|>:``.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% set role = message['role'] | lower %}"
    "{% if role == 'user' %}<|User|>: {% elif role == 'assistant' %}<|Assistant|>: "
    "{% else %}{{ message['role'] | capitalize }}: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}{% if not loop.first %}{{ '\\n' }}{% endif %}<image_placeholder>"
    "{% if not loop.last %}{{ '\\n' }}{% endif %}"
    "{% elif part['type'] == 'text' %}"
    "{% if not loop.first and message['content'][loop.index0 - 1]['type'] == 'text' %}{{ ' ' }}{% endif %}"
    "{{ part['text'] | trim }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if not loop.last or add_generation_prompt %}"
    "{% if role == 'user' %}{{ '\\n\\n' }}{% else %}<｜end▁of▁sentence｜>{% endif %}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|Assistant|>:{% endif %}"
)

#: The tiny tower's side and patch, in pixels: 8 x 8 patches, a token each.
IMAGE_SIZE, PATCH = 56, 7
TOKENS = (IMAGE_SIZE // PATCH) ** 2

#: The tiny tower: `TINY_VISION`'s widths with 4 heads, in JanusVisionConfig's fields (the MLP's
#: width as ``mlp_ratio``).
TOWER = {
    "hidden_size": 32,
    "mlp_ratio": 2,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": IMAGE_SIZE,
    "patch_size": PATCH,
    "projection_dim": 64,  # the aligner's width: the text model's
    "num_image_tokens": TOKENS,
}
#: A VQ model as small as its convolutions allow (GroupNorm of 32 groups): image generation only.
VQ = {
    "embed_dim": 8,
    "num_embeddings": 64,
    "latent_channels": 32,
    "base_channels": 32,
    "channel_multiplier": [1, 1],
    "num_res_blocks": 1,
    "projection_dim": 64,
    "image_token_embed_dim": 64,
}


def build_janus(path: Path, *, system_prompt: bool = False, **overrides: Any) -> Path:
    """Write a tiny Janus checkpoint. ``system_prompt``: the processor's
    ``use_default_system_prompt``. ``overrides``: ``text_config``, ``vision_config`` and
    ``vq_config`` dicts, ``image_processor`` (fields of JanusImageProcessor), other fields
    of the top-level config."""
    from transformers import JanusConfig, JanusImageProcessor, JanusProcessor

    images = {"size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "min_size": PATCH, **overrides.pop("image_processor", {})}
    return tiny(
        path, JanusConfig,
        lambda tok: JanusProcessor(image_processor=JanusImageProcessor(**images), tokenizer=tok,
                                   chat_template=CHAT_TEMPLATE, num_image_tokens=TOKENS,
                                   use_default_system_prompt=system_prompt),
        tokens=SPECIAL_TOKENS, roles={"add_bos_token": True, **ROLES}, text={"model_type": "llama", **TINY_TEXT},
        vision=TOWER, ids={"image_token_id": IMAGE}, fields={"vq_config": {**VQ, **overrides.pop("vq_config", {})}},
        overrides=overrides,
    )


def build_janus_pro(path: Path, **overrides: Any) -> Path:
    """Write a tiny Janus checkpoint whose processor writes Janus-Pro's default system
    prompt before every text (see `build_janus`)."""
    return build_janus(path, system_prompt=True, **overrides)


#: DeepSeek-VL's format, as its published template writes it: the system text, a blank line,
#: then each turn (``User: `` or ``Assistant: `` and its parts: an image as the placeholder
#: in line, texts stripped at the turn's ends, two texts joined by a space), a user turn
#: closed by a blank line, an assistant's by the end-of-sentence token; the generation
#: prompt is ``Assistant:``.
DEEPSEEK_VL_SYSTEM = ("You are a helpful language and vision assistant. You are able to understand the visual content "
                      "that the user provides, and assist the user with a variety of tasks using natural language.")
DEEPSEEK_VL_TEMPLATE = (
    DEEPSEEK_VL_SYSTEM + "\n\n"
    "{% for message in messages %}"
    "{% set role = message['role'] | lower %}"
    "{% if role == 'user' %}User: {% elif role == 'assistant' %}Assistant: {% else %}{{ message['role'] | capitalize }}: {% endif %}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image_placeholder>"
    "{% elif part['type'] == 'text' %}"
    "{% set text = part['text'] %}{% if loop.first %}{% set text = text | trim %}{% endif %}"
    "{% if loop.last %}{% set text = text.rstrip() %}{% endif %}"
    "{% if not loop.first and message['content'][loop.index0 - 1]['type'] == 'text' %}{{ ' ' }}{% endif %}{{ text }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{% if not loop.last or add_generation_prompt %}"
    "{% if role == 'user' %}{{ '\n\n' }}{% else %}<｜end▁of▁sentence｜>{% endif %}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)
DEEPSEEK_VL_TOKENS = (BOS, EOS, PAD, IMAGE)
#: The tiny SigLIP: the Janus tower's sizes, in SiglipVisionConfig's fields.
SIGLIP = {**TINY_VISION, "num_attention_heads": 4, "image_size": IMAGE_SIZE, "patch_size": PATCH}


def build_deepseek_vl(path: Path, **overrides: Any) -> Path:
    """Write a tiny DeepSeek-VL checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (fields of DeepseekVLImageProcessor), other
    fields of the top-level config."""
    from transformers import DeepseekVLConfig, DeepseekVLImageProcessor, DeepseekVLProcessor

    images = {"size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "min_size": PATCH, **overrides.pop("image_processor", {})}
    return tiny(
        path, DeepseekVLConfig,
        lambda tok: DeepseekVLProcessor(image_processor=DeepseekVLImageProcessor(**images), tokenizer=tok,
                                        chat_template=DEEPSEEK_VL_TEMPLATE, num_image_tokens=TOKENS),
        tokens=DEEPSEEK_VL_TOKENS,
        roles={"add_bos_token": True, "bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "image_token": IMAGE},
        text={"model_type": "llama", **TINY_TEXT}, vision={"model_type": "siglip_vision_model", **SIGLIP},
        ids={"image_token_id": IMAGE}, overrides=overrides,
    )


#: The tiny high-resolution tower: SAM's ViT as GOT-OCR 2.0's tiny one (32-pixel images, 2-pixel patches, a
#: windowed block then a global one), the aligner reading its neck's grid resized to the SigLIP tokens' 8 x 8.
HIGH_RES_SIDE = 32
SAM = {"hidden_size": 32, "output_channels": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "mlp_dim": 64,
       "image_size": HIGH_RES_SIDE, "patch_size": 2, "window_size": 6, "global_attn_indexes": [1],
       "initializer_range": 0.02}


def build_deepseek_vl_hybrid(path: Path, **overrides: Any) -> Path:
    """Write a tiny DeepSeek-VL-Hybrid checkpoint: DeepSeek-VL's (`build_deepseek_vl`) with the
    high-resolution SAM tower beside the SigLIP one, through the real
    ``DeepseekVLHybridProcessor`` (each image resized and padded twice: 56 pixels for SigLIP,
    32 for SAM). ``overrides``: ``text_config``, ``vision_config`` and ``high_res_vision_config``
    dicts, ``image_processor`` (fields of DeepseekVLHybridImageProcessor), other fields of the
    top-level config."""
    from transformers import DeepseekVLHybridConfig, DeepseekVLHybridImageProcessor, DeepseekVLHybridProcessor

    images = {"size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "min_size": PATCH,
              "high_res_size": {"height": HIGH_RES_SIDE, "width": HIGH_RES_SIDE}, **overrides.pop("image_processor", {})}
    high_res = {"model_type": "sam_vision_model", **SAM, **overrides.pop("high_res_vision_config", {})}
    return tiny(
        path, DeepseekVLHybridConfig,
        lambda tok: DeepseekVLHybridProcessor(image_processor=DeepseekVLHybridImageProcessor(**images), tokenizer=tok,
                                              chat_template=DEEPSEEK_VL_TEMPLATE, num_image_tokens=TOKENS),
        tokens=DEEPSEEK_VL_TOKENS,
        roles={"add_bos_token": True, "bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "image_token": IMAGE},
        text={"model_type": "llama", **TINY_TEXT}, vision={"model_type": "siglip_vision_model", **SIGLIP},
        ids={"image_token_id": IMAGE}, fields={"high_res_vision_config": high_res}, overrides=overrides,
    )


BUILDERS = {"janus": build_janus, "janus_pro": build_janus_pro, "deepseek_vl": build_deepseek_vl,
            "deepseek_vl_hybrid": build_deepseek_vl_hybrid}
