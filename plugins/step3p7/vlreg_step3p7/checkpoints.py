"""Step 3.7 checkpoints for tests: a tiny one, random weights, through the real processor.

The processor is ``Step3p7Processor`` over its own image processor, shrunk: the global view
112 x 112 pixels (2 x 2 tokens of 56: 14-pixel patches, 4 x 4 a token), local crops 56 pixels
(1 token each), images at most 448 pixels. The tokenizer holds its placeholders (``<im_patch>``,
the image's and each crop's start and end, ``<patch_newline>``). The chat template is written in
plain turns with each image as ``<im_patch>``, which the processor expands; no published template
was at hand, and nothing here depends on more than its placeholder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, chat_template, tiny

IMAGE = "<im_patch>"
TOKENS = ("<unk>", "<s>", "</s>", "<im_start>", "<im_end>", "<patch_start>", "<patch_end>", "<patch_newline>", IMAGE)
CHAT_TEMPLATE = chat_template("{role}: ", "\n", IMAGE, bos=True)

#: The tiny text model: block 0 sliding-window attention of 2 heads (per-layer heads) and a dense
#: MLP, block 1 full attention of 4 heads and 2 of 4 sigmoid-routed experts beside shared experts;
#: every head gated by a sigmoid of its own.
TEXT = {
    **TINY_TEXT, "head_dim": 16, "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8,
    "num_sliding_attention_heads": 2, "mlp_layer_types": ["dense", "sparse"], "n_routed_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "share_expert_dim": 32,
}


def build_step3p7(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Step3p7ForConditionalGeneration checkpoint to ``path``: the text
    model of `TEXT`; a tower 32 wide, 2 blocks of 2 heads on 14-pixel patches, a learned 4 x 4
    position grid; a projector from the convolutions' 128. ``overrides``: ``text_config`` and
    ``vision_config`` dicts, other fields of the config."""
    from transformers import Step3p7Config, Step3p7ImageProcessor, Step3p7Processor

    return tiny(
        path, Step3p7Config,
        lambda tok: Step3p7Processor(image_processor=Step3p7ImageProcessor(size={"height": 112, "width": 112},
                                                                           patch_size=56, max_image_size=448),
                                     tokenizer=tok, chat_template=CHAT_TEMPLATE),
        tokens=TOKENS, roles={"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"},
        text=TEXT,
        vision={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                "patch_size": 14, "image_size": 56},
        ids={"image_token_id": IMAGE},
        overrides=overrides,
    )
