"""Qwen2.5-VL checkpoints for tests: tiny, or a real geometry at reduced depth.

The tokenizer's special tokens, the chat template, the processor and its pixel bounds are
Qwen2-VL's (the Instruct templates are the same text; a test checks it against the
real one), so they come from that plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import from_source, save
from vlreg_qwen2_vl.checkpoints import MAX_PIXELS, MIN_PIXELS, TINY_TEXT, image_token_fields, qwen_processor

#: The tiny tower's window: 56 pixels, 2 x 2 merge blocks, so a 112 x 168 image
#: (4 x 6 merge blocks) has six windows.
TINY_WINDOW = 56
#: Tower depth of the real geometry when none is asked for: enough to keep the
#: checkpoint's last full-attention block of the first group (7 of 7, 15, 23, 31).
REAL_TOWER_DEPTH = 8


def build_qwen2_5_vl(path: Path, *, source: str | Path | None = None, **overrides: Any) -> Path:
    """Write a random-weight Qwen2_5_VLForConditionalGeneration checkpoint to ``path``.

    Tiny by default: text 64 wide, 4 query heads over 2 KV heads, mrope_section
    [2, 3, 3], untied embeddings like 7B; tower 32 wide, 2 blocks, windows of 56 pixels,
    block 1 full-attention. With ``source``, a real checkpoint's metadata folder: its
    config, tokenizer, processor and template, 2 text blocks and `REAL_TOWER_DEPTH` tower
    blocks unless ``overrides`` say otherwise, ``fullatt_block_indexes`` cut to the
    blocks that remain, in bfloat16. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, other fields of the top-level config.
    """
    path = Path(path)
    text = dict(overrides.pop("text_config", {}))
    vision = dict(overrides.pop("vision_config", {}))
    if source is not None:
        return _from_source(path, Path(source), text, vision, overrides)
    return _tiny(path, text, vision, overrides)


def _from_source(path: Path, source: Path, text: dict, vision: dict, overrides: dict) -> Path:
    from transformers import AutoConfig

    depth = vision.setdefault("depth", REAL_TOWER_DEPTH)
    full = AutoConfig.from_pretrained(source).vision_config.fullatt_block_indexes
    vision.setdefault("fullatt_block_indexes", [index for index in full if index < depth])
    text.setdefault("num_hidden_layers", 2)
    return from_source(path, source, text=text, vision=vision, **overrides)


def _tiny(path: Path, text: dict, vision: dict, overrides: dict) -> Path:
    from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    processor, ids = qwen_processor(Qwen2_5_VLProcessor, Qwen2VLVideoProcessor, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    text = {
        "vocab_size": len(processor.tokenizer),
        **TINY_TEXT,
        "bos_token_id": None,
        "eos_token_id": eos,
        "pad_token_id": pad,
        **text,
    }
    vision = {
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 4,
        "out_hidden_size": text["hidden_size"],
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": TINY_WINDOW,
        "fullatt_block_indexes": [1],
        **vision,
    }
    config = Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        **image_token_fields(ids),
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=pad,
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad))


#: LLaVA-OneVision-1.5's chat template: ChatML, each image Qwen2-VL's placeholder (the
#: published template's turns; nothing here depends on more than its placeholders).
ONEVISION_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                    "<|image_pad|>", "<|video_pad|>")


def build_llava_onevision1_5(path: Path, **overrides: Any) -> Path:
    """Write a random-weight LlavaOnevision15ForConditionalGeneration checkpoint to ``path``
    (transformers 5.25): a Qwen3 text model 64 wide, 2 blocks, 4 query heads over 2 key heads;
    the RICE-ViT tower 32 wide, 2 blocks, 2 heads, 14-pixel patches merged 2 x 2; the processor
    ``Exaone4_5_Processor`` over Qwen2-VL's image and video processors, as the published
    checkpoint's. ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields."""
    from transformers import Exaone4_5_Processor, Qwen2VLImageProcessor
    from transformers.models.llava_onevision1_5 import LlavaOnevision15Config
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from vlreg.testing import TINY_TEXT, chat_template, tiny

    # the tower embeds each patch with a 2-D convolution: one frame a patch row, not Qwen's two
    pixels = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS, "temporal_patch_size": 1}
    template = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<|vision_start|><|image_pad|><|vision_end|>",
                             "<|vision_start|><|video_pad|><|vision_end|>")
    return tiny(
        path, LlavaOnevision15Config,
        lambda tok: Exaone4_5_Processor(image_processor=Qwen2VLImageProcessor(**pixels), tokenizer=tok,
                                        video_processor=Qwen2VLVideoProcessor(**pixels), chat_template=template),
        tokens=ONEVISION_TOKENS, roles={"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        text={"model_type": "qwen3", **TINY_TEXT, "head_dim": 16},
        vision={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
                "out_hidden_size": TINY_TEXT["hidden_size"], "patch_size": 14, "spatial_merge_size": 2},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"},
        overrides=overrides,
    )
