"""A tiny Florence-2 checkpoint for tests: random weights, the real processor.

What a Florence-2 checkpoint holds, small: a byte-level tokenizer with BART's roles
(``<s>``, ``</s>``, ``<pad>``, ``<unk>``) and Florence-2's task tokens, the image
token ``<image>`` last (on the published checkpoints it is id 51289, beyond the text
vocabulary, in ``Florence2Config().image_token_id``; here it is the tokenizer's last id);
the real ``Florence2Processor`` over ``CLIPImageProcessor`` resizing every image to a
fixed square. Florence-2 has no chat template: the processor writes the prompt from a
task token (``"<CAPTION>"`` becomes "What does the image describe?"), and puts the
image's tokens, then ``<s>``, before it and ``</s>`` after.

The text model is BART, 64 wide: 2 encoder and 2 decoder blocks. The DaViT tower has two
stages, 16 then 32 wide, one block each, strides 4 then 2: a 32-pixel image is a 4 x 4
grid of tokens (8 x 8 pixels each), and the projector puts one pooled token (the grid's
mean) before them, 17 image tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import tokenizer
from vlreg.testing.shrink import ENCODER_DECODER

BOS, EOS, PAD, UNK, IMAGE = "<s>", "</s>", "<pad>", "<unk>", "<image>"
TASKS = ("<OCR>", "<CAPTION>", "<OD>")

SIDE = 32
VISION = {
    "depths": [1, 1],
    "patch_size": [7, 3],
    "patch_stride": [4, 2],
    "patch_padding": [3, 1],
    "patch_prenorm": [False, True],
    "embed_dim": [16, 32],
    "num_heads": [2, 4],
    "num_groups": [2, 4],
    "window_size": 2,
    "drop_path_rate": 0.0,
    "projection_dim": 64,
    "max_position_embeddings": 8,
}
TEXT = {
    "d_model": 64,
    **ENCODER_DECODER,
    "max_position_embeddings": 128,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
}


def tokens_per_image(vision: dict, side: int = SIDE) -> int:
    """Image tokens the processor writes: the final grid's cells and the pooled token."""
    for kernel, stride, padding in zip(vision["patch_size"], vision["patch_stride"], vision["patch_padding"]):
        side = (side + 2 * padding - kernel) // stride + 1
    return side * side + 1


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny Florence-2 checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` and ``vision_config`` dicts, other fields of the top-level config."""
    import torch
    from transformers import CLIPImageProcessor, Florence2Config, Florence2ForConditionalGeneration
    from transformers import Florence2Processor, GenerationConfig

    path = Path(path)
    tok = tokenizer((BOS, PAD, EOS, UNK, *TASKS, IMAGE), vocab_size=400, bos_token=BOS, eos_token=EOS,
                    pad_token=PAD, unk_token=UNK, image_token=IMAGE)
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in (("bos", BOS), ("eos", EOS), ("pad", PAD))}
    special = {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]}
    text = {**TEXT, "vocab_size": len(tok), **special, "decoder_start_token_id": ids["eos"],
            "forced_eos_token_id": ids["eos"], **overrides.pop("text_config", {})}
    vision = {**VISION, **overrides.pop("vision_config", {})}
    config = Florence2Config(text_config=text, vision_config=vision,
                             image_token_id=tok.convert_tokens_to_ids(IMAGE), **overrides)
    images = CLIPImageProcessor(size={"height": SIDE, "width": SIDE}, crop_size={"height": SIDE, "width": SIDE},
                                do_center_crop=False, image_seq_length=tokens_per_image(vision))
    processor = Florence2Processor(image_processor=images, tokenizer=tok)

    torch.manual_seed(0)
    model = Florence2ForConditionalGeneration(config).eval()
    model.save_pretrained(path)
    processor.save_pretrained(path)
    GenerationConfig(**special, decoder_start_token_id=ids["eos"]).save_pretrained(path)
    return path


BUILDERS = {"florence2": build}
