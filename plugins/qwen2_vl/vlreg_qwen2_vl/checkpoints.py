"""Qwen2-VL checkpoints for tests: tiny, or a real geometry at reduced depth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg import testing
from vlreg.testing import from_source, save, tokenizer

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

#: The Instruct checkpoints' chat format: a default system turn when the
#: conversation has none, each image as <|vision_start|><|image_pad|><|vision_end|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or 'image' in item or 'image_url' in item %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif item['type'] == 'video' or 'video' in item %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in item %}{{ item['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Pixels a tiny checkpoint's processor resizes an image between: 2 x 2 to 6 x 6
#: image tokens of 28 x 28 pixels.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 168 * 168

#: The tiny text model of the Qwen VL lines: 64 wide, 4 query heads over 2 KV heads of
#: 16, its 8 rotary frequencies in M-RoPE sections of 2, 3 and 3.
TINY_TEXT = {
    **testing.TINY_TEXT,
    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3], "rope_theta": 1e6},
}


def qwen_processor(processor_class: Any, video_class: Any, **sizes: Any) -> tuple[Any, dict[str, int]]:
    """A Qwen VL processor (``processor_class``) over the tiny tokenizer, the Qwen2-VL image
    processor and ``video_class`` at ``sizes``, with `CHAT_TEMPLATE`; and the ids of
    `SPECIAL_TOKENS`. Qwen2-VL, Qwen2.5-VL and the Qwen3 line share it."""
    from transformers import Qwen2VLImageProcessor

    tok = tokenizer(SPECIAL_TOKENS, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    made = processor_class(image_processor=Qwen2VLImageProcessor(**sizes), video_processor=video_class(**sizes),
                           tokenizer=tok, chat_template=CHAT_TEMPLATE)
    return made, dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))


def image_token_fields(ids: dict[str, int]) -> dict[str, int]:
    """The config's image and video token ids, from `qwen_processor`'s ``ids``."""
    return {"image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"]}


def build_qwen2_vl(
    path: Path, *, source: str | Path | None = None, pixels: tuple[int, int] = (MIN_PIXELS, MAX_PIXELS), **overrides: Any
) -> Path:
    """Write a random-weight Qwen2VLForConditionalGeneration checkpoint to ``path``.

    Tiny by default (text 64 wide, 4 query heads over 2 KV heads, mrope_section
    [2, 3, 3]; vision 32 wide; 2 blocks each), tied embeddings like 2B. With
    ``source``, a real checkpoint's metadata folder, the real config, tokenizer,
    processor and template at the depth ``overrides`` give (2 and 2 by default), in
    bfloat16. ``pixels``: the least and most pixels the tiny processor resizes an image
    to. ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config.
    """
    from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    text = dict(overrides.pop("text_config", {}))
    vision = dict(overrides.pop("vision_config", {}))
    if source is not None:
        text.setdefault("num_hidden_layers", 2)
        vision.setdefault("depth", 2)
        return from_source(path, source, text=text, vision=vision, **overrides)

    processor, ids = qwen_processor(Qwen2VLProcessor, Qwen2VLVideoProcessor, min_pixels=pixels[0], max_pixels=pixels[1])
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": len(processor.tokenizer),
            **TINY_TEXT,
            "tie_word_embeddings": True,
            "bos_token_id": None,
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            **text,
        },
        vision_config={
            "depth": 2,
            "embed_dim": 32,
            "num_heads": 4,
            "mlp_ratio": 2,
            "hidden_size": 64,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            **vision,
        },
        **image_token_fields(ids),
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        **overrides,
    )
    generation = GenerationConfig(eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|endoftext|>"])
    return save(path, config, processor, generation)
