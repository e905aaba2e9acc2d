"""MiniMax-M3-VL checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``MiniMaxM3VLProcessor`` over its own image processor (Qwen2-VL's: 14-pixel
patches, 2 x 2 a token) and video processor; the tokenizer holds its literal placeholders
(``]<]image[>[``, ``]<]video[>[`` and the image's start and end), which the processor expands.
The chat template is written in plain turns with each image as the image placeholder; no
published template was at hand, and nothing here depends on more than its placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE, VIDEO = "]<]image[>[", "]<]video[>["
TOKENS = ("<unk>", "<s>", "</s>", "]<]start of image[>[", "]<]end of image[>[", IMAGE, VIDEO)
CHAT_TEMPLATE = chat_template("{role}: ", "\n", IMAGE, VIDEO, bos=True)

#: Pixels the tiny processors resize an image (a frame) between: 2 x 2 to 4 x 4 tokens of 28 pixels.
SIZE = {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}

#: The tiny text model: a dense block with full attention, then a block whose attention reads the
#: key blocks its indexer selects (4 keys a block, the 2 best beside the query's own) and whose MLP
#: routes each token to 2 of 4 experts beside a shared expert.
TEXT = {
    **TINY_TEXT, "head_dim": 16, "intermediate_size": 32, "dense_intermediate_size": 128,
    "shared_intermediate_size": 32, "num_local_experts": 4, "num_experts_per_tok": 2,
    "layer_types": ["full_attention", "minimax_m3_sparse"], "mlp_layer_types": ["dense", "sparse"],
    "index_n_heads": 2, "index_head_dim": 16, "index_block_size": 4, "index_topk_blocks": 2,
    "index_local_blocks": 1,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
}


def build_minimax_m3_vl(path: Path, **overrides: Any) -> Path:
    """Write a random-weight MiniMaxM3SparseForConditionalGeneration checkpoint to ``path``: the
    text model of `TEXT` (64 wide, 4 query heads over 2 key heads of 16); a tower 32 wide, 2 blocks
    of 2 heads on 14-pixel patches; a projector 64 wide. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, other fields of the config."""
    from transformers import MiniMaxM3VLConfig, MiniMaxM3VLImageProcessor, MiniMaxM3VLProcessor
    from transformers.models.minimax_m3_vl.video_processing_minimax_m3_vl import MiniMaxM3VLVideoProcessor

    return tiny(
        path, MiniMaxM3VLConfig,
        lambda tok: MiniMaxM3VLProcessor(image_processor=MiniMaxM3VLImageProcessor(size=SIZE), tokenizer=tok,
                                         video_processor=MiniMaxM3VLVideoProcessor(size=SIZE),
                                         chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
        text=TEXT,
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 14, "spatial_merge_size": 2},
        ids={"image_token_index": IMAGE, "video_token_index": VIDEO},
        fields={"projector_hidden_size": 64},
        overrides=overrides,
    )
