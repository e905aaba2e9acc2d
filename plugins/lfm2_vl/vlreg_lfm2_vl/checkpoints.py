"""LFM2-VL checkpoints for tests: tiny random-weight ones, written as a hub checkpoint is.

``lfm2_vl`` writes the config, random weights, a tokenizer with LFM2-VL's special tokens
(``<|pad|>``, ``<|startoftext|>``, ``<|endoftext|>``, the ChatML turns, ``<image>``, the
image's markers ``<|image_start|>``, ``<|image_end|>``, ``<|img_thumbnail|>`` and a
``<|img_row_R_col_C|>`` per tile the tiny processor can cut), the real ``Lfm2VlProcessor``
with its ``Lfm2VlImageProcessor`` (SigLIP 2's NaFlex crops: tiles and a thumbnail, padded to
one length), and a chat template in LFM2-VL's format: ``<|startoftext|>``, then ChatML turns
(``<|im_start|>role\n ... <|im_end|>\n``), each image as ``<image>`` where it stands among
the texts (the processor expands it to its crops' tokens and markers), an optional system
turn first, and the generation prompt opening the assistant's turn. The published template
also renders tool lists and calls; they are left out (no value depends on them).

The tiny tower sees 4-pixel patches; a tile is 32 pixels (8 x 8 patches, 4 x 4 tokens of
2 x 2 patches), an image is one crop of 4 to 16 tokens or, where larger than
``max_image_tokens`` allows, 2 to `MAX_TILES` tiles and a thumbnail, every crop padded to 64
patches. The text model has LFM2's two kinds of block, in the published order (convolutions
first): two short-convolution blocks, then an attention block; its MLPs are sized as the
published configs size them (``block_auto_adjust_ff_dim``: two thirds of
``intermediate_size``, rounded up to ``block_multiple_of``), so they are wider or narrower
than the config's ``intermediate_size`` says.

``lfm3_vl`` writes a tiny LFM3-VL, random weights, through the real processor. The processor is ``Lfm3VlProcessor`` (Qwen3-VL's: an image's ``<|image_pad|>`` expanded to one
per merge block of ``image_grid_thw``, a video's to its frames' tokens, each temporal patch
after its time, ``<1.0 seconds>``, between ``<|vision_start|>`` and ``<|vision_end|>``) over
``Qwen2VLImageProcessor`` and ``Qwen3VLVideoProcessor``, as transformers maps ``lfm3_vl``.
The chat template is LFM2-VL's format (``<|startoftext|>``, ChatML turns) with each image as
``<|vision_start|><|image_pad|><|vision_end|>`` and each video as ``<|video_pad|>`` (the
processor writes a video's markers per frame); no published LFM3-VL template was at hand to
check it against, and nothing here depends on more than its placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, chat_template, tiny

PAD, BOS, EOS, TURN, END = "<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"
IMAGE, IMAGE_START, IMAGE_END, THUMBNAIL = "<image>", "<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"
#: The tiles an image is cut into at most; a tile's marker names its row and column.
MAX_TILES = 4
TILE_MARKERS = tuple(f"<|img_row_{r}_col_{c}|>" for r in range(1, MAX_TILES + 1) for c in range(1, MAX_TILES + 1))
SPECIAL_TOKENS = (PAD, BOS, EOS, TURN, END, IMAGE, IMAGE_START, IMAGE_END, THUMBNAIL, *TILE_MARKERS)
ROLES = {"pad_token": PAD, "bos_token": BOS, "eos_token": EOS}

#: LFM2-VL's format: ``<|startoftext|>``, ChatML turns, images as ``<image>``.
CHAT_TEMPLATE = chat_template(f"{TURN}{{role}}\n", f"{END}\n", IMAGE, bos=True)

#: The tiny tower's patch and a tile, in pixels; the pixel unshuffle's factor.
PATCH, TILE, FOLD = 4, 32, 2
TOKENS_PER_TILE = (TILE // PATCH // FOLD) ** 2
IMAGE_PROCESSOR = {
    "tile_size": TILE,
    "encoder_patch_size": PATCH,
    "downsample_factor": FOLD,
    "min_image_tokens": 4,
    "max_image_tokens": 16,
    "min_tiles": 2,
    "max_tiles": MAX_TILES,
}

TEXT = {
    "model_type": "lfm2",
    **TINY_TEXT,
    "intermediate_size": 144,  # two thirds: 96, rounded up to 16s: 96
    "block_auto_adjust_ff_dim": True,
    "block_ffn_dim_multiplier": 1.0,
    "block_multiple_of": 16,
    "num_hidden_layers": 3,
    "layer_types": ["conv", "conv", "full_attention"],
}
TOWER = {
    "model_type": "siglip2_vision_model",
    **TINY_VISION,
    "num_attention_heads": 4,
    "patch_size": PATCH,
    "num_patches": 64,  # the position embeddings' grid: 8 x 8, resized to each crop's
    "vision_use_head": False,
}


def build_lfm2_vl(path: Path, **overrides: Any) -> Path:
    """Write a tiny LFM2-VL checkpoint. ``overrides``: ``text_config`` and ``vision_config``
    dicts, ``image_processor`` (fields of ``Lfm2VlImageProcessor``), other fields of the
    top-level config."""
    from transformers import Lfm2VlConfig, Lfm2VlImageProcessor, Lfm2VlProcessor

    images = Lfm2VlImageProcessor(**{**IMAGE_PROCESSOR, **overrides.pop("image_processor", {})})
    return tiny(
        path, Lfm2VlConfig,
        lambda tok: Lfm2VlProcessor(image_processor=images, tokenizer=tok, chat_template=CHAT_TEMPLATE),
        tokens=SPECIAL_TOKENS, roles=ROLES, stops={**ROLES, "eos_token": END}, text=TEXT, vision=TOWER,
        ids={"image_token_id": IMAGE}, fields={"projector_hidden_size": 64, "downsample_factor": FOLD},
        overrides=overrides,
    )


# -- LFM3-VL ----------------------------------------------------------------------

LFM3_IMAGE, VIDEO, START, STOP = "<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"
LFM3_TOKENS = (PAD, BOS, EOS, TURN, END, LFM3_IMAGE, VIDEO, START, STOP)
LFM3_CHAT_TEMPLATE = chat_template(f"{TURN}{{role}}\n", f"{END}\n", f"{START}{LFM3_IMAGE}{STOP}", VIDEO, bos=True)

#: Pixels the tiny processor resizes an image between: 2 x 2 to 5 x 5 image tokens of 32 pixels.
MIN_PIXELS, MAX_PIXELS = 64 * 64, 160 * 160
SIZES = {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2,
         "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}}

#: Three blocks, one of each kind: a short convolution, sliding-window attention, full attention.
LFM3_TEXT = {"model_type": "lfm3", **TINY_TEXT, "num_hidden_layers": 3, "head_dim": 16, "sliding_window": 8,
             "layer_types": ["conv", "sliding_attention", "full_attention"]}
#: Two blocks: the 2-D convolution, then attention (4 query heads over 2 key heads).
LFM3_TOWER = {"model_type": "lfm3_vl_vision", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "layer_types": ["conv", "full_attention"],
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}


def build_lfm3_vl(path: Path, **overrides: Any) -> Path:
    """Write a tiny LFM3-VL checkpoint. ``overrides``: ``text_config`` and ``vision_config``
    dicts, other fields of the top-level config."""
    from transformers import Lfm3VlConfig, Lfm3VlProcessor, Qwen2VLImageProcessor, Qwen3VLVideoProcessor

    return tiny(
        path, Lfm3VlConfig,
        lambda tok: Lfm3VlProcessor(image_processor=Qwen2VLImageProcessor(**SIZES), tokenizer=tok,
                                    video_processor=Qwen3VLVideoProcessor(**SIZES), chat_template=LFM3_CHAT_TEMPLATE),
        tokens=LFM3_TOKENS, roles=ROLES, stops={**ROLES, "eos_token": END}, text=LFM3_TEXT, vision=LFM3_TOWER,
        ids={"image_token_id": LFM3_IMAGE, "video_token_id": VIDEO, "vision_start_token_id": START,
             "vision_end_token_id": STOP},
        fields={"projector_hidden_size": 64}, overrides=overrides,
    )


BUILDERS = {"lfm2_vl": build_lfm2_vl, "lfm3_vl": build_lfm3_vl}
