"""Molmo 2 checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Molmo2Processor`` over its own image processor, shrunk: crops of 56 pixels
(4 x 4 patches of 14), overlapping by one patch on each side, at most 4 of them, pooled 2 x 2
into tokens; the low-resolution view is one such crop. The tokenizer holds its placeholders
(``<|image|>``, which the processor expands into ``<im_patch>`` rows between ``<im_start>``,
``<low_res_im_start>``, ``<im_col>`` and ``<im_end>``). The chat template is written in plain
turns with each image as ``<|image|>``; no published template was at hand, and nothing here
depends on more than its placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE = "<|image|>"
TOKENS = ("<unk>", "<|endoftext|>", "<im_patch>", "<im_col>", "<im_start>", "<low_res_im_start>", "<frame_start>",
          "<im_end>", "<frame_end>", "<im_low>", IMAGE, "<|video|>")
CHAT_TEMPLATE = chat_template("{role}: ", "\n", IMAGE)  # the processor writes the BOS token before it

#: The tiny text model: Olmo's whole-projection q/k norms, block 0's rope unscaled, pre-norm blocks.
TEXT = {**TINY_TEXT, "head_dim": 16, "qk_norm_type": "olmo", "rope_scaling_layers": [1], "additional_vocab_size": 0}


def build_molmo2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Molmo2ForConditionalGeneration checkpoint to ``path``: the text model
    of `TEXT`; a tower 32 wide, 2 blocks of 2 heads over 56-pixel crops; an adapter reading the
    streams after both blocks (``vision_feature_layer`` ``[-1, 0]``). ``overrides``: ``text_config``,
    ``vision_config`` and ``adapter_config`` dicts, other fields of the config."""
    from transformers import Molmo2Config, Molmo2ImageProcessor, Molmo2Processor, Molmo2VideoProcessor

    adapter = {"vision_feature_layer": [-1, 0], "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2,
               "head_dim": 16, "intermediate_size": 64, "text_hidden_size": TEXT["hidden_size"], "initializer_range": 0.2,
               **overrides.pop("adapter_config", {})}
    return tiny(
        path, Molmo2Config,
        lambda tok: Molmo2Processor(
            image_processor=Molmo2ImageProcessor(size={"height": 56, "width": 56}, max_crops=4,
                                                 overlap_margins=[1, 1], patch_size=14, pooling_size=[2, 2]),
            video_processor=Molmo2VideoProcessor(size={"height": 56, "width": 56}, patch_size=14),
            tokenizer=tok, chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<unk>"},
        text=TEXT,
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "num_key_value_heads": 2, "head_dim": 16, "patch_size": 14, "image_size": [56, 56],
                "initializer_range": 0.2},
        ids={"image_patch_id": "<im_patch>", "image_start_token_id": "<im_start>",
             "low_res_image_start_token_id": "<low_res_im_start>", "image_end_token_id": "<im_end>",
             "frame_start_token_id": "<frame_start>", "frame_end_token_id": "<frame_end>"},
        fields={"adapter_config": adapter},
        overrides=overrides,
    )
