"""Checkpoints for tests of the two LLaVA lines built for videos, whose images vlreg serves.

* ``llava_next_video``: LlavaNextVideoForConditionalGeneration, LLaVA-NeXT-Video-7B's shape:
  a CLIP tower (block -2's stream, CLS dropped) on a Llama text model, images cut into
  crops on a grid as NeXT does (`checkpoints.GRID_PINPOINTS`), with the real
  ``LlavaNextVideoProcessor`` and its video processor;
* ``video_llava``: VideoLlavaForConditionalGeneration, Video-LLaVA-7B's shape: two CLIP
  towers of one config (``model.image_tower``, ``model.video_tower``) on a Llama text model,
  an image resized and centre-cropped to the tower's square (a CLS row then the patches,
  "default" drops the CLS), with the real ``VideoLlavaProcessor`` (its image processor hands
  the pixels on as ``pixel_values_images``).

Both prompts are in the Vicuna format of their 7B checkpoints ("USER: <image>\\n<text>
ASSISTANT:"), a turn's images first, then its videos, each on a line of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import tokenizer

from .checkpoints import (GRID_PINPOINTS, IMAGE, IMAGE_SIZE, LLAMA_ROLES, PATCH_SIZE, TEXT, TOWER, VIDEO,
                          _clip_image_processor, _ids, _save, real_geometry)

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


def _llama(overrides: dict, tok: Any, special: dict) -> dict:
    return {"model_type": "llama", "vocab_size": len(tok), **TEXT, **special, **overrides.pop("text_config", {})}


def _clip(overrides: dict) -> dict:
    return {"model_type": "clip_vision_model", **TOWER, "num_hidden_layers": 3, **overrides.pop("vision_config", {})}


def build_llava_next_video(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a LLaVA-NeXT-Video-like checkpoint: a CLIP tower (3 blocks) on a Llama text
    model, crops on `GRID_PINPOINTS`, frames pooled 2 x 2. ``overrides``: ``text_config``
    and ``vision_config`` dicts, other fields of the top-level config."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import (LlavaNextImageProcessor, LlavaNextVideoConfig, LlavaNextVideoProcessor,
                              LlavaNextVideoVideoProcessor)

    tok = tokenizer(LLAMA_VIDEO_TOKENS, **LLAMA_ROLES)
    ids = _ids(tok, LLAMA_VIDEO_TOKENS)
    side = {"shortest_edge": IMAGE_SIZE}
    processor = LlavaNextVideoProcessor(
        video_processor=LlavaNextVideoVideoProcessor(size=side, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
        image_processor=_clip_image_processor(LlavaNextImageProcessor, image_grid_pinpoints=GRID_PINPOINTS),
        tokenizer=tok,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=VICUNA_VIDEO_TEMPLATE,
    )
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]}
    config = LlavaNextVideoConfig(
        text_config=_llama(overrides, tok, special),
        vision_config=_clip(overrides),
        image_token_index=ids[IMAGE],
        video_token_index=ids[VIDEO],
        image_grid_pinpoints=GRID_PINPOINTS,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        image_seq_length=(IMAGE_SIZE // PATCH_SIZE) ** 2,
        video_seq_length=(IMAGE_SIZE // PATCH_SIZE // 2) ** 2,
        **special,
        **overrides,
    )
    return _save(path, config, processor, special)


def build_video_llava(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a Video-LLaVA-like checkpoint: two CLIP towers (3 blocks each) on a Llama
    text model, the projector reading block -2 without the CLS row. ``overrides`` as for
    `build_llava_next_video`."""
    if source is not None:
        return real_geometry(path, source, **overrides)
    from transformers import VideoLlavaConfig, VideoLlavaImageProcessor, VideoLlavaProcessor, VideoLlavaVideoProcessor

    tok = tokenizer(LLAMA_VIDEO_TOKENS, **LLAMA_ROLES)
    ids = _ids(tok, LLAMA_VIDEO_TOKENS)
    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    processor = VideoLlavaProcessor(
        image_processor=VideoLlavaImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square),
        video_processor=VideoLlavaVideoProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square),
        tokenizer=tok,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=VICUNA_VIDEO_TEMPLATE,
    )
    special = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]}
    config = VideoLlavaConfig(
        text_config=_llama(overrides, tok, special),
        vision_config=_clip(overrides),
        image_token_index=ids[IMAGE],
        video_token_index=ids[VIDEO],
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        image_seq_length=(IMAGE_SIZE // PATCH_SIZE) ** 2,
        video_seq_length=8 * ((IMAGE_SIZE // PATCH_SIZE) ** 2 + 1),
        **special,
        **overrides,
    )
    return _save(path, config, processor, special)


BUILDERS = {"llava_next_video": build_llava_next_video, "video_llava": build_video_llava}
