"""ERNIE 4.5-VL-MoE checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Ernie4_5_VLMoeProcessor`` over its own image and video processors, which
reads its placeholder and marker tokens off the tokenizer (``image_token``,
``image_start_token``, ...), as the published tokenizer names them. The chat template writes
turns as ERNIE 4.5-VL's does (``User: ``, ``Assistant: ``) and each image as
``Picture k:<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>`` without the count; nothing here
depends on more than its placeholders. The video processor resizes frames between the same
pixel counts as the image processor (it takes them as ``size``), and draws no timestamps on
frames (the published one does, with a font file the builder would need).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE, IMAGE_START, IMAGE_END = "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_START|>", "<|IMAGE_END|>"
VIDEO, VIDEO_START, VIDEO_END = "<|VIDEO_PLACEHOLDER|>", "<|VIDEO_START|>", "<|VIDEO_END|>"
TOKENS = ("<unk>", "<s>", "</s>", IMAGE, IMAGE_START, IMAGE_END, VIDEO, VIDEO_START, VIDEO_END)
CHAT_TEMPLATE = chat_template("{role}: ", "\n", f"Picture:{IMAGE_START}{IMAGE}{IMAGE_END}",
                              f"Video:{VIDEO_START}{VIDEO}{VIDEO_END}")
ROLES = {"image_token": IMAGE, "image_start_token": IMAGE_START, "image_end_token": IMAGE_END,
         "video_token": VIDEO, "video_start_token": VIDEO_START, "video_end_token": VIDEO_END}

#: Pixels the tiny processor resizes an image between: 2 x 2 to 6 x 6 image tokens of 28 pixels.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 168 * 168


def build_ernie4_5_vl_moe(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Ernie4_5_VLMoeForConditionalGeneration checkpoint to ``path``: a
    text model 64 wide, 2 blocks (block 0 dense, block 1 experts: a text and a vision bank of 4
    experts, 2 a token, of widths 32 and 16, and one shared expert), 4 query heads over 2 key
    heads; a Qwen ViT 32 wide, 2 blocks. ``overrides``: ``text_config`` and ``vision_config``
    dicts, other fields of the top-level config."""
    from transformers import Ernie4_5_VLMoeConfig, Ernie4_5_VLMoeImageProcessor, Ernie4_5_VLMoeProcessor
    from transformers.models.ernie4_5_vl_moe.video_processing_ernie4_5_vl_moe import Ernie4_5_VLMoeVideoProcessor

    pixels = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}

    def processor(tok):
        tok = type(tok)(tokenizer_object=tok.backend_tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                        pad_token="<unk>", extra_special_tokens=ROLES)
        return Ernie4_5_VLMoeProcessor(
            image_processor=Ernie4_5_VLMoeImageProcessor(**pixels), tokenizer=tok,
            video_processor=Ernie4_5_VLMoeVideoProcessor(size={"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
                                                         draw_on_frames=False), chat_template=CHAT_TEMPLATE)

    text = {**TINY_TEXT, "mlp_layer_types": ["dense", "sparse"], "moe_num_experts": 4, "moe_k": 2,
            "moe_intermediate_size": [32, 16], "moe_num_shared_experts": 1, "tie_word_embeddings": False,
            # the head is 16 wide: 8 frequencies, 3 + 3 over height and width, 2 over time
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [3, 3, 2]}}
    return tiny(
        path, Ernie4_5_VLMoeConfig, processor,
        tokens=TOKENS, roles={"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>"},
        text=text,
        vision={"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4, "patch_size": 14,
                "spatial_merge_size": 2, "temporal_merge_size": 2},
        ids={"image_token_id": IMAGE, "image_start_token_id": IMAGE_START, "image_end_token_id": IMAGE_END,
             "video_token_id": VIDEO, "video_start_token_id": VIDEO_START, "video_end_token_id": VIDEO_END},
        fields={"tie_word_embeddings": False},
        overrides=overrides,
    )
