"""An Aria checkpoint for tests: tiny, random weights, the real processor.

The builder writes what a hub checkpoint holds: the config, random weights, a tokenizer
with Aria's special tokens (``<|img|>`` and the ``<fim_prefix>`` / ``<fim_suffix>`` around
it, the turn tokens), the real `AriaProcessor` with its image processor and a chat template
in Aria's prompt format. Aria's image processor makes frames of 490 or 980 pixels only
(``max_image_size``; the processor's default is 980), so the tower cuts them into 70-pixel
patches, 7 x 7 or 14 x 14 (Aria's 14-pixel patches make 35 x 35 and 70 x 70), and the
projector's learned queries read them, 4 or 8 a frame (``projector_patch_to_query_dict``
{49: 4, 196: 8}, the processor's ``size_conversion`` {490: 4, 980: 8}; Aria's are 128 and
256). Images are resized whole by default; with ``split_image`` they are cut into crops of
a frame each. The text model is 2 blocks of 4 experts (2 a token) beside one shared expert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tiny

IMAGE, PREFIX, SUFFIX = "<|img|>", "<fim_prefix>", "<fim_suffix>"
TURN, END = "<|im_start|>", "<|im_end|>"
#: Aria's prompt format: each turn "<|im_start|>role\n...<|im_end|>\n", an image as
#: "<fim_prefix><|img|><fim_suffix>", the assistant's turn opened by the generation prompt.
TEMPLATE = chat_template(f"{TURN}{{role}}\n", f"{END}\n", PREFIX + IMAGE + SUFFIX)

PATCH = 70
#: frame side -> learned queries a frame
QUERIES = {490: 4, 980: 8}
#: The tiny text model, its MLP 4 experts 32 wide (2 a token) beside one shared expert.
TEXT = {**TINY_TEXT, "intermediate_size": 32, "moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 1}
TOWER = {"model_type": "idefics3_vision", **TINY_VISION, "num_attention_heads": 4, "patch_size": PATCH,
         "image_size": 980}


def aria(path: Path, **overrides: Any) -> Path:
    """Write a tiny random-weight aria checkpoint to ``path`` (see the module).
    ``overrides``: ``text_config`` and ``vision_config`` dicts, other fields of the
    top-level config."""
    from transformers import AriaConfig, AriaImageProcessor, AriaProcessor

    patch = overrides.get("vision_config", {}).get("patch_size", PATCH)
    return tiny(
        path, AriaConfig,
        lambda tok: AriaProcessor(image_processor=AriaImageProcessor(min_image_size=PATCH), tokenizer=tok,
                                  chat_template=TEMPLATE, size_conversion=QUERIES),
        tokens=("<unk>", "<s>", "</s>", TURN, END, PREFIX, SUFFIX, IMAGE),
        roles={"unk_token": "<unk>", "bos_token": "<s>", "eos_token": END, "pad_token": "<unk>", "image_token": IMAGE},
        text=TEXT, vision=TOWER, ids={"image_token_index": IMAGE},
        fields={"projector_patch_to_query_dict": {(side // patch) ** 2: count for side, count in QUERIES.items()}},
        overrides=overrides,
    )


BUILDERS = {"aria": aria}
