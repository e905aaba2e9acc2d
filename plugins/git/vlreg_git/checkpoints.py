"""A tiny GIT checkpoint for tests: random weights, the real processor.

What a GIT checkpoint (microsoft/git-base) holds, small: a tokenizer with BERT's roles
(``[CLS]`` begins a prompt, ``[SEP]`` ends it, ``[PAD]``), the real ``GitProcessor`` over
``CLIPImageProcessor`` resizing an image's shorter side and cropping its centre square. GIT has no chat template and
no image placeholder: a prompt is plain text, and the model puts the image's tokens before it.

The text model is 64 wide, 2 blocks; the CLIP tower 32 wide, 2 blocks, 14-pixel patches over
a 28-pixel image: a class token and 2 x 2 patches, 5 image tokens before the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, tokenizer

CLS, SEP, PAD, UNK = "[CLS]", "[SEP]", "[PAD]", "[UNK]"

SIDE, PATCH = 28, 14
TEXT = {key: value for key, value in TINY_TEXT.items() if key != "num_key_value_heads"}
TEXT |= {"max_position_embeddings": 128, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
VISION = {**TINY_VISION, "image_size": SIDE, "patch_size": PATCH}


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny GIT checkpoint to ``path`` (see the module). ``overrides``: a
    ``vision_config`` dict, other fields of the config."""
    import torch
    from transformers import CLIPImageProcessor, GenerationConfig, GitConfig, GitForCausalLM, GitProcessor

    path = Path(path)
    tok = tokenizer((PAD, CLS, SEP, UNK), vocab_size=400, pad_token=PAD, cls_token=CLS, sep_token=SEP,
                    unk_token=UNK, bos_token=CLS, eos_token=SEP)
    tok._tokenizer.post_processor = _bert_template(tok)
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in (("bos", CLS), ("eos", SEP), ("pad", PAD))}
    special = {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]}
    vision = {**VISION, **overrides.pop("vision_config", {})}
    config = GitConfig(vision_config=vision, vocab_size=len(tok), **TEXT, **special, **overrides)
    images = CLIPImageProcessor(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
    processor = GitProcessor(image_processor=images, tokenizer=tok)

    torch.manual_seed(0)
    model = GitForCausalLM(config).eval()
    model.save_pretrained(path)
    processor.save_pretrained(path)
    GenerationConfig(**special).save_pretrained(path)
    return path


def _bert_template(tok: Any) -> Any:
    """BERT's post-processor: ``[CLS]`` before a prompt, ``[SEP]`` after it, as GIT's tokenizer writes."""
    from tokenizers import processors

    cls, sep = tok.convert_tokens_to_ids(CLS), tok.convert_tokens_to_ids(SEP)
    return processors.TemplateProcessing(single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B {SEP}",
                                         special_tokens=[(CLS, cls), (SEP, sep)])


BUILDERS = {"git": build}
