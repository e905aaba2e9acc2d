"""Aya Vision and Command A Vision checkpoints for tests: tiny random-weight ones, written
as a hub checkpoint is.

Each builder writes the config, random weights, a tokenizer with Cohere's special tokens
(``<PAD>`` 0 and ``<BOS_TOKEN>`` 5 as the Cohere2 config's defaults expect, the turn
tokens, the image markers), the family's real processor and image processor and a chat
template in the family's format:

* ``aya_vision``: SigLIP on Cohere2 through ``AyaVisionProcessor`` and GOT-OCR2's image
  processor (tiles and a thumbnail; each crop ``<|START_OF_IMG|>``-bracketed, named by a
  ``TILE_<i>`` or ``TILE_GLOBAL`` text before its ``<|IMG_PATCH|>`` tokens); the projector
  reads the last block's stream before SigLIP's final norm (``vision_feature_layer`` -1);
* ``cohere2_vision``: SigLIP (with its unused pooling head, as transformers' default
  keeps it) on Cohere2 through ``Cohere2VisionProcessor`` and its image processor (tiles
  and a thumbnail, each crop's ``<|IMG_PATCH|>`` tokens followed by one
  ``<|IMG_LINE_BREAK|>``); the projector reads the tower's output.

The tiny tower sees 56 x 56 crops in 7-pixel patches (8 x 8 patches); the pixel shuffle
folds each 2 x 2 block into one token, so a crop is 4 x 4 = 16 tokens, and an image is cut
into 1 to `MAX_TILES` tiles plus the thumbnail. The Cohere2 text model has one block of
each kind: a sliding-window block with rope (a window of `WINDOW` tokens, shorter than an
image prompt, so the window acts) and a full-attention block without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, tiny

PAD, BOS, TURN, END = "<PAD>", "<BOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>"
START_IMAGE, END_IMAGE, PATCH, LINE_BREAK = "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>"
#: Cohere's special tokens in the order its tokenizer numbers them (``<PAD>`` 0 ... ``<BOS_TOKEN>`` 5).
SPECIAL_TOKENS = (
    PAD, "<UNK>", "<CLS>", "<SEP>", "<MASK_TOKEN>", BOS, TURN, END, "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", START_IMAGE, END_IMAGE, PATCH, LINE_BREAK,
)
ROLES = {"pad_token": PAD, "unk_token": "<UNK>", "bos_token": BOS, "eos_token": END}
#: What Cohere2VisionProcessor reads off the tokenizer (Command A Vision's tokenizer_config names them).
IMAGE_ROLES = {"image_token": PATCH, "boi_token": START_IMAGE, "eoi_token": END_IMAGE, "img_line_break_token": LINE_BREAK}


def _template(image: str, reply: tuple[str, str]) -> str:
    """Cohere's turns: ``<|START_OF_TURN_TOKEN|>`` and the role's token, the content, then
    ``<|END_OF_TURN_TOKEN|>``; each image part as ``image`` where it stands among the texts,
    an assistant turn's text between ``reply``; the generation prompt opens the chatbot's turn."""
    opened, closed = reply
    return (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|START_OF_TURN_TOKEN|>' }}"
        "{% if message['role'] == 'system' %}{{ '<|SYSTEM_TOKEN|>' }}"
        "{% elif message['role'] == 'user' %}{{ '<|USER_TOKEN|>' }}{% else %}{{ '<|CHATBOT_TOKEN|>' }}{% endif %}"
        "{% if message['role'] == 'assistant' %}{{ '" + opened + "' }}{% endif %}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}{{ '" + image + "' }}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}"
        "{% if message['role'] == 'assistant' %}{{ '" + closed + "' }}{% endif %}"
        "{{ '<|END_OF_TURN_TOKEN|>' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
    )


#: Aya Vision's format: Command R's turns, an image as the processor's ``<image>``.
AYA_TEMPLATE = _template("<image>", ("", ""))
#: Command A Vision's format: Command A's turns, a reply between ``<|START_RESPONSE|>`` and
#: ``<|END_RESPONSE|>``, an image as ``<|IMG_PATCH|>`` (the token the processor expands).
#: The published template also opens every conversation with a long default system
#: preamble, left out here to keep the prompts short.
COMMAND_A_TEMPLATE = _template(PATCH, ("<|START_RESPONSE|>", "<|END_RESPONSE|>"))

#: The tiny tower's crop and patch, in pixels, and the tiles an image is cut into at most.
TILE, PATCH_SIZE, MAX_TILES = 56, 7, 4
#: The pixel shuffle's factor, and a crop's tokens: (56 / 7 / 2) ** 2.
FOLD = 2
TOKENS_PER_TILE = (TILE // PATCH_SIZE // FOLD) ** 2
#: The sliding-window blocks' window, in tokens.
WINDOW = 32

#: The tiny text model, its blocks a sliding-window one then a full-attention one.
TEXT = {"model_type": "cohere2", **TINY_TEXT, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": WINDOW}
TOWER = {**TINY_VISION, "num_attention_heads": 4, "image_size": TILE, "patch_size": PATCH_SIZE}


def build_aya_vision(path: Path, **overrides: Any) -> Path:
    """Write a tiny Aya Vision checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (fields of GOT-OCR2's image processor:
    ``max_patches``, ...), other fields of the top-level config."""
    from transformers import AyaVisionConfig, AyaVisionProcessor, GotOcr2ImageProcessor

    images = {"size": {"height": TILE, "width": TILE}, "crop_to_patches": True, "min_patches": 1, "max_patches": MAX_TILES,
              **overrides.pop("image_processor", {})}
    # patch_size is the pixels a token covers (a 7-pixel patch, shuffled 2 x 2), img_size a crop's
    return tiny(
        path, AyaVisionConfig,
        lambda tok: AyaVisionProcessor(image_processor=GotOcr2ImageProcessor(**images), tokenizer=tok,
                                       patch_size=PATCH_SIZE * FOLD, img_size=TILE, chat_template=AYA_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles=ROLES, text=TEXT, vision={**TOWER, "vision_use_head": False},
        ids={"image_token_index": PATCH},
        fields={"downsample_factor": FOLD, "alignment_intermediate_size": 128, "vision_feature_layer": -1,
                "vision_feature_select_strategy": "full"},
        overrides=overrides,
    )


def build_cohere2_vision(path: Path, **overrides: Any) -> Path:
    """Write a tiny Command A Vision checkpoint. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, ``image_processor`` (fields of its image processor), other
    fields of the top-level config."""
    from transformers import Cohere2VisionConfig, Cohere2VisionImageProcessor, Cohere2VisionProcessor

    # patch_size is a crop's tokens a side (the processor writes patch_size ** 2 a crop)
    images = {"size": {"height": TILE, "width": TILE}, "patch_size": TILE // PATCH_SIZE // FOLD, "min_patches": 1,
              "max_patches": MAX_TILES, **overrides.pop("image_processor", {})}
    return tiny(
        path, Cohere2VisionConfig,
        lambda tok: Cohere2VisionProcessor(image_processor=Cohere2VisionImageProcessor(**images), tokenizer=tok,
                                           chat_template=COMMAND_A_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles={**ROLES, **IMAGE_ROLES}, stops=ROLES, text=TEXT, vision=TOWER,
        ids={"image_token_id": PATCH}, fields={"downsample_factor": FOLD, "alignment_intermediate_size": 128},
        overrides=overrides,
    )


BUILDERS = {"aya_vision": build_aya_vision, "cohere2_vision": build_cohere2_vision}
