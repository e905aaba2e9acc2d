"""GOT-OCR 2.0 and PP-Chart2Table checkpoints for tests: tiny random weights, the real
processors, a chat template in each model's prompt format.

Both load as ``GotOcr2ForConditionalGeneration`` and share one tiny shape:

* the tower sees 32 x 32 pixels in 2-pixel patches, a 16 x 16 grid of patches, which the
  projector's two strided convolutions make 4 x 4 = 16 tokens a crop (the published: 1024
  pixels in 16-pixel patches, 64 x 64 patches, 256 tokens);
* its two blocks are one windowed (6 x 6 patches a window, so the windows pad the grid to
  18 x 18, as the published 14 pad 64 to 70) and one global (``global_attn_indexes``); the
  absolute positions and the relative-position tables, which transformers initialises to
  zeros, are drawn at random, so positions act as in a trained checkpoint;
* the text model is Qwen2, 64 wide, 2 blocks, tied embeddings (Qwen2-0.5B's are).

The tokenizer holds Qwen's turn tokens and GOT's markers; ``<imgpad>`` is the image token.
``got_ocr2`` saves ``GotOcr2Processor`` over ``GotOcr2ImageProcessor`` (one crop by default,
tiles and a thumbnail with ``crop_to_patches=True``) and a template writing the prompt that
processor builds itself when given no text (`GOT_TEMPLATE`; its 256 placeholders a crop are
the tower's 16 in vlreg, `wrappers.tower_tokens`); ``pp_chart2table`` saves
``PPChart2TableProcessor``, which expands nothing, and a template that writes the image's
16 ``<imgpad>`` itself (the published one writes 256).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vlreg.testing import TINY_TEXT, tokenizer

START, END, TEXT_END = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
IMAGE_START, IMAGE_END, IMAGE = "<img>", "</img>", "<imgpad>"
SPECIAL_TOKENS = (TEXT_END, START, END, "<ref>", "</ref>", "<box>", "</box>", "<quad>", "</quad>", IMAGE_START,
                  IMAGE_END, IMAGE)
ROLES = {"eos_token": END, "pad_token": TEXT_END}
#: The system turn both models are prompted with (GotOcr2Processor writes it).
SYSTEM = "You should follow the instructions carefully and explain your answers in detail."

#: The tiny crop and patch, in pixels: a 16 x 16 grid of patches, 4 x 4 tokens.
SIDE, PATCH_SIZE = 32, 2
TOKENS = 16

TOWER = {
    "hidden_size": 32,
    "output_channels": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "mlp_dim": 64,
    "image_size": SIDE,
    "patch_size": PATCH_SIZE,
    "window_size": 6,
    "global_attn_indexes": [1],
    "initializer_range": 0.02,  # the default (1e-10) leaves the tower's weights all but zero
}


def _template(image: str) -> str:
    """ChatML turns with GOT's system turn first where the conversation has none, each turn
    ended by ``<|im_end|>`` with no newline after it; an image part as ``image`` and a
    newline, where it stands among the texts."""
    return (
        "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\n" + SYSTEM + "<|im_end|>' }}{% endif %}"
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + image + "\\n' }}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}{{ '<|im_end|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )


#: GOT-OCR 2.0's format, as GotOcr2Processor builds it for an image with no text (the
#: published checkpoint has no template): ``<img><imgpad></img>`` and a newline, the
#: processor expanding ``<imgpad>`` to the image's tokens.
GOT_TEMPLATE = _template(IMAGE_START + IMAGE + IMAGE_END)
#: PP-Chart2Table's: an image as ``<img>``, its tokens written out, ``</img>``.
CHART_TEMPLATE = _template(IMAGE_START + IMAGE * TOKENS + IMAGE_END)


def build_got_ocr2(path: Path, **overrides: Any) -> Path:
    """Write a tiny GOT-OCR 2.0 checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (fields of GotOcr2ImageProcessor:
    ``crop_to_patches``, ``max_patches``, ...), other fields of the top-level config."""
    from transformers import GotOcr2Config, GotOcr2ImageProcessor, GotOcr2Processor

    tok = tokenizer(SPECIAL_TOKENS, **ROLES)
    images = {"size": {"height": SIDE, "width": SIDE}, **overrides.pop("image_processor", {})}
    processor = GotOcr2Processor(image_processor=GotOcr2ImageProcessor(**images), tokenizer=tok,
                                 chat_template=GOT_TEMPLATE)
    return _save(path, GotOcr2Config, processor, tok, overrides)


def build_pp_chart2table(path: Path, **overrides: Any) -> Path:
    """Write a tiny PP-Chart2Table checkpoint. ``overrides`` as `build_got_ocr2`'s."""
    from transformers import PPChart2TableConfig, PPChart2TableImageProcessor, PPChart2TableProcessor

    tok = tokenizer(SPECIAL_TOKENS, **ROLES)
    images = {"size": {"height": SIDE, "width": SIDE}, **overrides.pop("image_processor", {})}
    processor = PPChart2TableProcessor(image_processor=PPChart2TableImageProcessor(**images), tokenizer=tok,
                                       chat_template=CHART_TEMPLATE)
    return _save(path, PPChart2TableConfig, processor, tok, overrides)


def _save(path: Path, config_class: type, processor: Any, tok: Any, overrides: dict) -> Path:
    """Random weights (seeded), positions drawn at random, the processor and a generation
    config ending on ``<|im_end|>`` or ``<|endoftext|>``."""
    from transformers import GenerationConfig, GotOcr2ForConditionalGeneration

    ids = {"eos_token_id": tok.convert_tokens_to_ids(END), "pad_token_id": tok.pad_token_id,
           "bos_token_id": tok.convert_tokens_to_ids(TEXT_END)}
    text = {"model_type": "qwen2", "vocab_size": len(tok), **TINY_TEXT, "tie_word_embeddings": True, **ids,
            **overrides.pop("text_config", {})}
    config = config_class(text_config=text, vision_config={**TOWER, **overrides.pop("vision_config", {})},
                          image_token_index=tok.convert_tokens_to_ids(IMAGE), **overrides)
    torch.manual_seed(0)
    model = GotOcr2ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, parameter in model.model.vision_tower.named_parameters():
            if name == "pos_embed" or name.endswith(("rel_pos_h", "rel_pos_w")):
                parameter.normal_(std=0.5)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    ends = [ids["eos_token_id"], ids["bos_token_id"]]
    GenerationConfig(bos_token_id=ids["bos_token_id"], eos_token_id=ends, pad_token_id=ids["pad_token_id"]).save_pretrained(path)
    return Path(path)


BUILDERS = {"got_ocr2": build_got_ocr2, "pp_chart2table": build_pp_chart2table}
