"""LLaVA checkpoints for tests: tiny shapes of each line, or a real geometry at reduced depth.

Each tiny builder writes what a hub checkpoint holds: the config, random weights, a
tokenizer with ``<image>``, the real processor class with its image processor, and a
chat template in the prompt format of the checkpoints the shape stands for:

* ``llava_interleave``: a SigLIP tower (no CLS) on a Qwen2 text model, the last
  block's stream before ``post_layernorm`` projected whole (``vision_feature_layer``
  -1, strategy "full");
* ``llava_1_5``: a CLIP tower with a CLS row on a Llama text model, block -2's stream
  projected without the CLS row (-2, "default");
* ``llava_next``: LlavaNextForConditionalGeneration, a CLIP tower on a Mistral text
  model, each image cut into crops on a grid (anyres), unpadded, with newline rows;
* ``vipllava``: vip-llava-7b's shape, ``llava_1_5``'s but for a projector reading blocks 1 and 0
  (``vision_feature_layer`` [-2, 1]: the last block runs for nothing), in ``###Human:`` turns;
* ``llava_onevision``: LlavaOnevisionForConditionalGeneration, a SigLIP tower on a Qwen2
  text model, crops on grids of up to 3 x 3 tiles, unpadded, shrunk past 4 tiles' worth
  of tokens (``anyres_max_4``; the real checkpoints allow 9 of 36), with newline rows;
* ``llava_pixtral``: Pixtral-12B's layout, a Pixtral tower (served by vlreg-mistral3)
  on a Mistral text model with the real ``PixtralProcessor``: one token per 16-pixel
  patch (no spatial merge), each row of them ended by ``[IMG_BREAK]``, the last by
  ``[IMG_END]``, images resized to a longest edge of 64 pixels (the real one: 1024);
* ``llava_next_video``: LlavaNextVideoForConditionalGeneration, LLaVA-NeXT-Video-7B's
  shape: a CLIP tower (block -2's stream, CLS dropped) on a Llama text model, images cut
  into crops on a grid as NeXT does (`GRID_PINPOINTS`), with the real
  ``LlavaNextVideoProcessor`` and its video processor;
* ``video_llava``: VideoLlavaForConditionalGeneration, Video-LLaVA-7B's shape: two CLIP
  towers of one config (``model.image_tower``, ``model.video_tower``) on a Llama text
  model, an image resized and centre-cropped to the tower's square (a CLS row then the
  patches, "default" drops the CLS), with the real ``VideoLlavaProcessor`` (its image
  processor hands the pixels on as ``pixel_values_images``).

The two video lines' prompts are in the Vicuna format of their 7B checkpoints ("USER:
<image>\\n<text> ASSISTANT:"), a turn's images first, then its videos, each on a line of
its own.

Every builder takes ``source``, a real checkpoint's metadata folder (config, tokenizer,
processor, template; no weights): the checkpoint is then that geometry at the depth the
overrides give (2 text and 2 tower blocks by default), in bfloat16.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, from_source, tiny

IMAGE = "<image>"

#: llava-interleave's format (Qwen's im_start turns): a turn's images first, then each
#: of its texts on a line of its own.
INTERLEAVE_TEMPLATE = (
    "{% for turn in messages %}"
    "<|im_start|>{{ turn['role'] }}\n"
    "{% if turn['content'] is string %}{{ '\\n' ~ turn['content'] }}{% else %}"
    "{% for part in turn['content'] if part['type'] == 'image' %}<image>{% endfor %}"
    "{% for part in turn['content'] if part['type'] == 'text' %}{{ '\\n' ~ part['text'] }}{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Sets ``texts`` to a turn's texts, whether its content is a string or a list of parts.
_TEXTS = (
    "{% if turn['content'] is string %}{% set texts = [turn['content']] %}"
    "{% else %}{% set texts = turn['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | list %}"
    "{% endif %}"
)
#: Each image part of a turn as "<image>" on a line of its own.
_IMAGE_LINES = (
    "{% if turn['content'] is not string %}"
    "{% for part in turn['content'] if part['type'] == 'image' %}<image>\n{% endfor %}{% endif %}"
)

#: LLaVA-1.5's format: "USER: <image>\n<text> ASSISTANT: <answer></s>", a system turn's
#: text with no role before it.
LLAVA_1_5_TEMPLATE = (
    "{{ bos_token }}{% for turn in messages %}" + _TEXTS
    + "{% if turn['role'] != 'system' %}{{ turn['role'] | upper }}: {% endif %}" + _IMAGE_LINES
    + "{{ texts | join(' ') }}{% if turn['role'] == 'assistant' %}{{ eos_token }}{% else %} {% endif %}"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)

#: LLaVA-NeXT on Mistral's format: "[INST] <image>\n<text> [/INST] <answer></s>", a system
#: turn's text opening the next user turn.
LLAVA_NEXT_TEMPLATE = (
    "{{ bos_token }}{% set held = namespace(system='') %}{% for turn in messages %}" + _TEXTS
    + "{% if turn['role'] == 'system' %}{% set held.system = texts | join(' ') ~ '\\n\\n' %}"
    "{% elif turn['role'] == 'user' %}[INST] {{ held.system }}{% set held.system = '' %}" + _IMAGE_LINES
    + "{{ texts | join(' ') }} [/INST]"
    "{% else %} {{ texts | join(' ') }}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)

#: LLaVA-OneVision's format (Qwen's turns, the role and a space, no newline after a
#: turn's end): a turn's images, its videos, then each text on a line of its own.
ONEVISION_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' '}}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>' }}{% endfor %}"
    "{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\\n' + content['text'] }}{% endfor %}"
    "{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

QWEN_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", IMAGE)
VIDEO = "<video>"
QWEN_ROLES = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
LLAMA_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", IMAGE)
LLAMA_ROLES = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}

#: The tiny towers' side and patch: a 56 x 56 image is 4 x 4 = 16 patches.
IMAGE_SIZE, PATCH_SIZE = 56, 14
#: LLaVA-NeXT's grid of crops, in pixels, a multiple of the tower's side.
GRID_PINPOINTS = [[56, 112], [112, 56], [112, 112]]

#: LLaVA-OneVision's tiles, (height, width) in pixels: every grid of 1 to 3 x 1 to 3 tiles.
ONEVISION_PINPOINTS = [[IMAGE_SIZE * rows, IMAGE_SIZE * columns] for rows in (1, 2, 3) for columns in (1, 2, 3)]
ONEVISION_ASPECT = "anyres_max_4"

#: The tiny tower: `TINY_VISION` with 4 heads of 8, at the tiny side and patch.
TOWER = {**TINY_VISION, "num_attention_heads": 4, "image_size": IMAGE_SIZE, "patch_size": PATCH_SIZE}


#: What every tiny LLaVA's config says alike: the special ids at its root too.
LLAVA = {"special_at_root": True}
#: The projector's read: the last block's stream whole, or block -2's without the CLS row.
FULL = {"vision_feature_layer": -1, "vision_feature_select_strategy": "full"}
DEFAULT = {"vision_feature_layer": -2, "vision_feature_select_strategy": "default"}


def build_llava_interleave(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a llava-interleave-like checkpoint: SigLIP tower, Qwen2 text model, tied
    embeddings. ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields
    of the top-level config."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import LlavaConfig, LlavaProcessor, SiglipImageProcessor

    images = SiglipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3)
    return tiny(
        path, LlavaConfig,
        lambda tok: LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=PATCH_SIZE,
                                   vision_feature_select_strategy="full", num_additional_image_tokens=0,
                                   chat_template=INTERLEAVE_TEMPLATE),
        tokens=QWEN_TOKENS, roles=QWEN_ROLES, text={"model_type": "qwen2", **TINY_TEXT, "tie_word_embeddings": True},
        vision={"model_type": "siglip_vision_model", **TOWER, "vision_use_head": False}, ids={"image_token_index": IMAGE},
        fields={"image_seq_length": (IMAGE_SIZE // PATCH_SIZE) ** 2, **FULL, "tie_word_embeddings": True},
        overrides=overrides, **LLAVA,
    )


def build_llava_1_5(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a LLaVA-1.5-like checkpoint: CLIP tower with a CLS row, Llama text model,
    untied readout. ``overrides`` as for `build_llava_interleave`; the tower is 3 blocks
    deep by default, so block -2 is neither the first nor the last."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import LlavaConfig

    return _clip_on_llama(path, LlavaConfig, LLAVA_1_5_TEMPLATE, overrides, **DEFAULT)


#: VipLLaVA's format: a fixed system line (a system turn's text replaces it), then turns as
#: "###Human: " or "###Assistant: ", a turn's images each "<image>" on a line before its text.
VIPLLAVA_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
                   "The assistant gives helpful, detailed, and polite answers to the human's questions.")
VIPLLAVA_TEMPLATE = (
    "{{ bos_token }}{% set system = namespace(text='" + VIPLLAVA_SYSTEM.replace("'", "\\'") + "') %}"
    "{% for turn in messages if turn['role'] == 'system' %}" + _TEXTS + "{% set system.text = texts | join(' ') %}"
    "{% endfor %}{{ system.text }}{% for turn in messages if turn['role'] != 'system' %}" + _TEXTS
    + "{{ '###Human: ' if turn['role'] == 'user' else '###Assistant: ' }}" + _IMAGE_LINES
    + "{{ texts | join(' ') }}{% endfor %}{% if add_generation_prompt %}###Assistant:{% endif %}"
)


def build_vipllava(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a VipLLaVA checkpoint (the module's ``vipllava``); ``overrides`` as for `build_llava_interleave`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import VipLlavaConfig

    return _clip_on_llama(path, VipLlavaConfig, VIPLLAVA_TEMPLATE, overrides, vision_feature_layer=[-2, 1])


def _clip_on_llama(path: Path, config_class: type, template: str, overrides: dict, **fields: Any) -> Path:
    """A CLIP tower (3 blocks, CLS dropped) on Llama through LLaVA's processor; ``fields``, the wrapper's own."""
    from transformers import CLIPImageProcessor, LlavaProcessor

    return tiny(
        path, config_class,
        lambda tok: LlavaProcessor(image_processor=_clip_image_processor(CLIPImageProcessor), tokenizer=tok,
                                   patch_size=PATCH_SIZE, vision_feature_select_strategy="default",
                                   num_additional_image_tokens=1, chat_template=template),
        tokens=LLAMA_TOKENS, roles=LLAMA_ROLES, text={"model_type": "llama", **TINY_TEXT},
        vision={"model_type": "clip_vision_model", **TOWER, "num_hidden_layers": 3}, ids={"image_token_index": IMAGE},
        fields={"image_seq_length": (IMAGE_SIZE // PATCH_SIZE) ** 2, **fields}, overrides=overrides, **LLAVA,
    )


def build_llava_next(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a LLaVA-NeXT-like checkpoint: CLIP tower (3 blocks), Mistral text model,
    crops on `GRID_PINPOINTS`. ``overrides`` as for `build_llava_interleave`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import LlavaNextConfig, LlavaNextImageProcessor, LlavaNextProcessor

    images = _clip_image_processor(LlavaNextImageProcessor, image_grid_pinpoints=GRID_PINPOINTS)
    return tiny(
        path, LlavaNextConfig,
        lambda tok: LlavaNextProcessor(image_processor=images, tokenizer=tok, patch_size=PATCH_SIZE,
                                       vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                       chat_template=LLAVA_NEXT_TEMPLATE),
        tokens=LLAMA_TOKENS, roles=LLAMA_ROLES, text={"model_type": "mistral", **TINY_TEXT, "sliding_window": None},
        vision={"model_type": "clip_vision_model", **TOWER, "num_hidden_layers": 3}, ids={"image_token_index": IMAGE},
        fields={"image_grid_pinpoints": GRID_PINPOINTS, **DEFAULT}, overrides=overrides, **LLAVA,
    )


def build_llava_onevision(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a LLaVA-OneVision-like checkpoint: SigLIP tower, Qwen2 text model, crops on
    `ONEVISION_PINPOINTS`, shrunk past `ONEVISION_ASPECT`. ``overrides`` as for
    `build_llava_interleave`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    normalise = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    side = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    images = LlavaOnevisionImageProcessor(size=side, image_grid_pinpoints=ONEVISION_PINPOINTS, **normalise)
    return tiny(
        path, LlavaOnevisionConfig,
        lambda tok: LlavaOnevisionProcessor(
            image_processor=images, tokenizer=tok, video_processor=LlavaOnevisionVideoProcessor(size=side, **normalise),
            num_image_tokens=(IMAGE_SIZE // PATCH_SIZE) ** 2, vision_feature_select_strategy="full",
            vision_aspect_ratio=ONEVISION_ASPECT, chat_template=ONEVISION_TEMPLATE),
        tokens=(*QWEN_TOKENS, VIDEO), roles=QWEN_ROLES, text={"model_type": "qwen2", **TINY_TEXT},
        vision={"model_type": "siglip_vision_model", **TOWER, "vision_use_head": False},
        ids={"image_token_index": IMAGE, "video_token_index": VIDEO},
        fields={"image_grid_pinpoints": ONEVISION_PINPOINTS, "vision_aspect_ratio": ONEVISION_ASPECT, **FULL},
        overrides=overrides, **LLAVA,
    )


def real_geometry(path: Path, source: str | Path, **overrides: Any) -> Path:
    """A real LLaVA or LLaVA-NeXT checkpoint's geometry at reduced depth, in bfloat16,
    with its own tokenizer, processor and chat template. ``overrides``:
    ``text_config`` and ``vision_config`` dicts (``num_hidden_layers``, 2 by default),
    other fields of the top-level config."""
    text = {"num_hidden_layers": 2, **overrides.pop("text_config", {})}
    vision = {"num_hidden_layers": 2, **overrides.pop("vision_config", {})}
    return from_source(path, source, text=text, vision=vision, **overrides)


def _clip_image_processor(cls: type, **options: Any) -> Any:
    return cls(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}, **options
    )


#: Pixtral-12B's tokens: Mistral's control tokens and Pixtral's three image tokens.
PIXTRAL_TOKENS = ("<unk>", "<s>", "</s>", "[IMG]", "[IMG_BREAK]", "[IMG_END]", "[INST]", "[/INST]", "<pad>")
PIXTRAL_PATCH, PIXTRAL_LONGEST = 16, 64

#: Pixtral-12B's format: "<s>[INST]" + the user's parts in order ("[IMG]" where an image
#: goes) + "[/INST]", the assistant's reply + "</s>"; a system turn's text opens the next
#: user turn, followed by a blank line.
PIXTRAL_TEMPLATE = (
    "{{ bos_token }}{% set held = namespace(system='') %}{% for turn in messages %}"
    "{% if turn['content'] is string %}{% set parts = [{'type': 'text', 'text': turn['content']}] %}"
    "{% else %}{% set parts = turn['content'] %}{% endif %}"
    "{% if turn['role'] == 'system' %}"
    "{% set held.system = parts | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(' ') ~ '\\n\\n' %}"
    "{% elif turn['role'] == 'user' %}[INST]{{ held.system }}{% set held.system = '' %}"
    "{% for part in parts %}{% if part['type'] == 'image' %}[IMG]{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}[/INST]"
    "{% else %}{% for part in parts if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)


def build_llava_pixtral(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a Pixtral-12B-like checkpoint: LlavaForConditionalGeneration with a
    two-block Pixtral tower (16-pixel patches) on a Mistral text model, the projector
    reading the last block's stream whole (-1, "full"). ``overrides`` as for
    `build_llava_interleave`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import LlavaConfig, PixtralImageProcessor, PixtralProcessor

    patch = {"height": PIXTRAL_PATCH, "width": PIXTRAL_PATCH}
    images = PixtralImageProcessor(size={"longest_edge": PIXTRAL_LONGEST}, patch_size=patch)
    return tiny(
        path, LlavaConfig,
        lambda tok: PixtralProcessor(image_processor=images, tokenizer=tok, patch_size=PIXTRAL_PATCH,
                                     chat_template=PIXTRAL_TEMPLATE),
        tokens=PIXTRAL_TOKENS, roles=LLAMA_ROLES, text={"model_type": "mistral", **TINY_TEXT, "sliding_window": None},
        vision={"model_type": "pixtral", **TOWER, "image_size": PIXTRAL_LONGEST, "patch_size": PIXTRAL_PATCH,
                "head_dim": 8},
        ids={"image_token_index": "[IMG]"}, fields=FULL, overrides=overrides, **LLAVA,
    )


LLAMA_VIDEO_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", IMAGE, VIDEO)

#: Vicuna's format as the LLaVA video lines use it: a system turn's text as it is, then each
#: turn "ROLE: " with its images and videos one a line, then its texts each followed by a
#: space (the assistant's marked for generation), and "ASSISTANT:" to answer.
VICUNA_VIDEO_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'][0]['text'] + ' ' }}"
    "{% else %}{{ message['role'].upper() + ': ' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>\\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ content['text'] + ' ' }}{% endgeneration %}"
    "{% else %}{{ content['text'] + ' ' }}{% endif %}{% endfor %}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def _video_line(path: Path, config_class: type, processor: Any, overrides: dict, **fields: Any) -> Path:
    """Save a LLaVA video line's checkpoint: a CLIP tower (3 blocks) on a Llama text model,
    the projector reading block -2 without the CLS row; ``fields``, the line's own."""
    return tiny(
        path, config_class, processor, tokens=LLAMA_VIDEO_TOKENS, roles=LLAMA_ROLES,
        text={"model_type": "llama", **TINY_TEXT}, vision={"model_type": "clip_vision_model", **TOWER,
                                                            "num_hidden_layers": 3},
        ids={"image_token_index": IMAGE, "video_token_index": VIDEO},
        fields={**DEFAULT, "image_seq_length": (IMAGE_SIZE // PATCH_SIZE) ** 2, **fields}, overrides=overrides, **LLAVA,
    )


def _video_processor(processor_class: type, **parts: Any) -> Any:
    """The line's processor, around the tokenizer `tiny` trains."""
    return lambda tok: processor_class(**parts, tokenizer=tok, patch_size=PATCH_SIZE,
                                       vision_feature_select_strategy="default", num_additional_image_tokens=1,
                                       chat_template=VICUNA_VIDEO_TEMPLATE)


def build_llava_next_video(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a LLaVA-NeXT-Video-like checkpoint: a CLIP tower (3 blocks) on a Llama text
    model, crops on `GRID_PINPOINTS`, frames pooled 2 x 2. ``overrides``: ``text_config``
    and ``vision_config`` dicts, other fields of the top-level config."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import (LlavaNextImageProcessor, LlavaNextVideoConfig, LlavaNextVideoProcessor,
                              LlavaNextVideoVideoProcessor)

    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    processor = _video_processor(
        LlavaNextVideoProcessor,
        video_processor=LlavaNextVideoVideoProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square),
        image_processor=_clip_image_processor(LlavaNextImageProcessor, image_grid_pinpoints=GRID_PINPOINTS),
    )
    return _video_line(path, LlavaNextVideoConfig, processor, overrides, image_grid_pinpoints=GRID_PINPOINTS,
                       video_seq_length=(IMAGE_SIZE // PATCH_SIZE // 2) ** 2)


def build_video_llava(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a Video-LLaVA-like checkpoint: two CLIP towers (3 blocks each) on a Llama
    text model, the projector reading block -2 without the CLS row. ``overrides`` as for
    `build_llava_next_video`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import VideoLlavaConfig, VideoLlavaImageProcessor, VideoLlavaProcessor, VideoLlavaVideoProcessor

    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    processor = _video_processor(
        VideoLlavaProcessor,
        image_processor=VideoLlavaImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square),
        video_processor=VideoLlavaVideoProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square),
    )
    return _video_line(path, VideoLlavaConfig, processor, overrides,
                       video_seq_length=8 * ((IMAGE_SIZE // PATCH_SIZE) ** 2 + 1))


BUILDERS = {
    "llava": build_llava_interleave,  # the model type's default: the smallest published LLaVA's shape
    "llava_interleave": build_llava_interleave,
    "llava_1_5": build_llava_1_5,
    "llava_next": build_llava_next,
    "vipllava": build_vipllava,
    "llava_onevision": build_llava_onevision,
    "llava_pixtral": build_llava_pixtral,
    "llava_next_video": build_llava_next_video,
    "video_llava": build_video_llava,
}
