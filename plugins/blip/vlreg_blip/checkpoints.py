"""BLIP-2, InstructBLIP and InstructBLIP-Video checkpoints for tests: tiny random-weight
ones, written as a hub checkpoint is.

Each builder writes the config, random weights, a byte-level tokenizer with the text
model's roles and the ``<image>`` token (a special token of its own id, which the processor
finds and does not add again, as on the published tokenizers), the family's real processor
with ``num_query_tokens`` (it prepends that many ``<image>`` to each prompt, before the
text's first token) over the real ``BlipImageProcessor``, and a chat template:

* ``blip-2``: the BLIP-2 tower, a Q-Former and an OPT text model (Salesforce/blip2-opt-*'s
  shape) through ``Blip2Processor``; the template writes BLIP-2's prompt format,
  ``Question: ... Answer:`` (the published checkpoints ship no template: this is the format
  their model cards prompt with);
* ``instructblip``: the same tower and a Q-Former that also reads the instruction
  (``use_qformer_text_input``), over a Llama text model (Vicuna's shape) through
  ``InstructBlipProcessor``, which tokenizes the prompt a second time with the Q-Former's
  own tokenizer (``qformer_input_ids``); the template writes the instruction as it is;
* ``instructblipvideo``: InstructBLIP's shapes under InstructBLIP-Video's classes, through
  ``InstructBlipVideoProcessor`` over its video processor (28 x 28 frames), the placeholder
  ``<video>``; a prompt's images are a clip's frames.

The tiny tower sees 28 x 28 images in 7-pixel patches (16 patches and a class token); the
Q-Former has `QUERIES` learned queries, so an image is `QUERIES` image tokens whatever its
size. The Q-Former's second block cross-attends to the tower (``cross_attention_frequency``
2 puts cross-attention on blocks 0 and 2 of 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, TINY_VISION, save, tokenizer

BOS, PAD, EOS, UNK, IMAGE, VIDEO = "<s>", "<pad>", "</s>", "<unk>", "<image>", "<video>"
#: The image's tokens, one per learned query of the Q-Former.
QUERIES = 8
SIDE, PATCH = 28, 7

TOWER = {
    **TINY_VISION,
    "num_attention_heads": 4,
    "image_size": SIDE,
    "patch_size": PATCH,
    # the config's default (1e-10) starts the tower's weights at all but zero, where every
    # pattern is uniform and an edit of the queries changes nothing
    "initializer_range": 0.02,
}
QFORMER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "cross_attention_frequency": 2,
    "max_position_embeddings": 128,
}
OPT = {
    "model_type": "opt",
    "hidden_size": 64,
    "ffn_dim": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 256,
    "word_embed_proj_dim": 64,
    "dropout": 0.0,
    "attention_dropout": 0.0,
}
LLAMA = {"model_type": "llama", **TINY_TEXT, "num_key_value_heads": 4, "max_position_embeddings": 256}


def _user_turns(opened: str, closed: str) -> str:
    """A template writing each user turn's texts between ``opened`` and ``closed`` (an image
    part writes nothing: the processor puts the image's tokens before the prompt), each
    assistant turn's after a space, ended by ``eos_token``."""
    return (
        "{{ bos_token }}{% for message in messages %}"
        "{% if message['role'] == 'user' %}{{ '" + opened + "' }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
        "{% endif %}{{ '" + closed + "' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' ' }}"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
        "{% endif %}{{ eos_token }}{% endif %}{% endfor %}"
    )


#: BLIP-2's prompt format (its model cards' ``Question: {} Answer:``).
BLIP2_TEMPLATE = _user_turns("Question: ", " Answer:")
#: InstructBLIP's: the instruction as it is.
INSTRUCTBLIP_TEMPLATE = _user_turns("", "")


def _images() -> Any:
    from transformers import BlipImageProcessor

    return BlipImageProcessor(size={"height": SIDE, "width": SIDE})


def _text(tok: Any, base: dict, overrides: dict) -> dict:
    ids = {"pad_token_id": tok.pad_token_id, "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    return {**base, "vocab_size": len(tok), **ids, **overrides}


def build_blip_2(path: Path, **overrides: Any) -> Path:
    """Write a tiny BLIP-2 (OPT) checkpoint. ``overrides``: ``text_config``,
    ``vision_config`` and ``qformer_config`` dicts, other fields of the top-level config."""
    from transformers import Blip2Config, Blip2Processor

    tok = tokenizer((BOS, PAD, EOS, UNK, IMAGE), bos_token=EOS, eos_token=EOS, pad_token=PAD, unk_token=UNK)
    queries = overrides.pop("num_query_tokens", QUERIES)
    processor = Blip2Processor(image_processor=_images(), tokenizer=tok, num_query_tokens=queries)
    processor.chat_template = BLIP2_TEMPLATE  # the constructor drops a chat_template= it is given
    config = Blip2Config(
        vision_config={**TOWER, **overrides.pop("vision_config", {})},
        qformer_config={**QFORMER, **overrides.pop("qformer_config", {})},
        text_config=_text(tok, OPT, overrides.pop("text_config", {})),
        num_query_tokens=queries,
        image_token_index=tok.convert_tokens_to_ids(IMAGE),
        **overrides,
    )
    return _save(path, config, processor, tok)


def _qformer_tokenizer() -> Any:
    """The Q-Former's own tokenizer (BERT's on the published checkpoints): [PAD] is id 0, as its config expects."""
    return tokenizer(("[PAD]", "[UNK]", "[CLS]", "[SEP]"), pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                     sep_token="[SEP]")


def _instructblip_config(config_class: type, tok: Any, qformer_tok: Any, queries: int, overrides: dict, **fields: Any):
    return config_class(
        vision_config={**TOWER, **overrides.pop("vision_config", {})},
        qformer_config={**QFORMER, "vocab_size": len(qformer_tok), "pad_token_id": qformer_tok.pad_token_id,
                        **overrides.pop("qformer_config", {})},
        text_config=_text(tok, LLAMA, overrides.pop("text_config", {})),
        num_query_tokens=queries,
        **fields,
        **overrides,
    )


def build_instructblip(path: Path, **overrides: Any) -> Path:
    """Write a tiny InstructBLIP (Llama) checkpoint. ``overrides`` as `build_blip_2`'s."""
    from transformers import InstructBlipConfig, InstructBlipProcessor

    tok = tokenizer((UNK, BOS, EOS, PAD, IMAGE), bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK)
    qformer_tok = _qformer_tokenizer()
    queries = overrides.pop("num_query_tokens", QUERIES)
    processor = InstructBlipProcessor(image_processor=_images(), tokenizer=tok, qformer_tokenizer=qformer_tok,
                                      num_query_tokens=queries)
    processor.chat_template = INSTRUCTBLIP_TEMPLATE
    config = _instructblip_config(InstructBlipConfig, tok, qformer_tok, queries, overrides,
                                  image_token_index=tok.convert_tokens_to_ids(IMAGE))
    return _save(path, config, processor, tok)


def build_instructblipvideo(path: Path, **overrides: Any) -> Path:
    """Write a tiny InstructBLIP-Video (Llama) checkpoint. ``overrides`` as `build_blip_2`'s."""
    from transformers import InstructBlipVideoConfig, InstructBlipVideoProcessor, InstructBlipVideoVideoProcessor

    # <video> is in the vocabulary, as the processor adds it; the tokenizer names no video_token, as the
    # published ones do not (the processor then reads the token as its own AddedToken)
    tok = tokenizer((UNK, BOS, EOS, PAD, VIDEO), bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK)
    qformer_tok = _qformer_tokenizer()
    queries = overrides.pop("num_query_tokens", QUERIES)
    frames = InstructBlipVideoVideoProcessor(size={"height": SIDE, "width": SIDE})
    processor = InstructBlipVideoProcessor(video_processor=frames, tokenizer=tok, qformer_tokenizer=qformer_tok,
                                           num_query_tokens=queries)
    processor.chat_template = INSTRUCTBLIP_TEMPLATE
    config = _instructblip_config(InstructBlipVideoConfig, tok, qformer_tok, queries, overrides,
                                  video_token_index=tok.convert_tokens_to_ids(VIDEO))
    return _save(path, config, processor, tok)


def _save(path: Path, config: Any, processor: Any, tok: Any) -> Path:
    from transformers import GenerationConfig

    generation = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return save(path, config, processor, generation)


BUILDERS = {"blip-2": build_blip_2, "instructblip": build_instructblip, "instructblipvideo": build_instructblipvideo}
