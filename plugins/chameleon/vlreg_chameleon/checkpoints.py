"""Chameleon and Emu3 checkpoints for tests: tiny random-weight ones, written as a hub
checkpoint is.

Each builder writes the config, random weights, a tokenizer with the family's special
tokens (one image-code token per code of the tiny codebook, named as the family names
them), the family's real processor with its real image processor, and the prompt format
of the published checkpoint. The config's ``vocabulary_map`` is the tokenizer's vocabulary,
as on the published checkpoints: the wrapper finds the image token and the codes' tokens
there. The VQ models are as small as their convolutions allow (GroupNorm of 32 groups: 32
channels), with four stages, so a code is 8 x 8 pixels; the text models take
`vlreg.testing.TINY_TEXT`'s widths.

* ``chameleon``: ``<s>`` (which the tokenizer adds before every text, as Chameleon's
  Llama tokenizer does), ``<image>``, the image's brackets ``<racm3:break>`` and
  ``<eoss>``, the separator ``<reserved08706>`` (the processor ends every prompt with it,
  its chat mode) and an ``IMGIMG<code>Z`` token per code (the code's digits as letters,
  ``A`` for 0). ``ChameleonProcessor`` with ``ChameleonImageProcessor`` resizing the
  shorter side to 32 pixels and cropping the centre 32 x 32: 4 x 4 codes, 16 image tokens.
  The published checkpoint has no chat template (prompts are text with ``<image>`` where
  the image goes), so none is written.
* ``chameleon_swin``: the same with ``swin_norm`` (the norms reordered, as on Chameleon's
  largest checkpoints).
* ``emu3``: its reserved ``<|extra_N|>`` tokens in their roles (BOS ``<|extra_203|>``,
  EOS ``<|extra_204|>``, end-of-line ``<|extra_200|>``, end-of-frame ``<|extra_201|>``), the
  image's brackets, ``<image>`` and a ``<|visual tokenNNNNNN|>`` per code. As Emu3's
  GPT-2-style tokenizer, it adds no BOS: the processor writes it before every text.
  ``Emu3Processor`` with ``Emu3ImageProcessor`` keeping images between 16 x 16 and 64 x 64
  pixels (a 112 x 84 image is resized to 72 x 48: 9 x 6 codes, 6 x 10 = 60 image tokens
  with the row ends), and Emu3-Chat's chat template (transformers' conversion script's:
  ``USER: `` with the turn's images first, then its texts, and ``ASSISTANT:``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, save, tokenizer

#: Codes in the tiny codebooks (Chameleon's published one has 8192, Emu3's 32768).
CODES = 64
#: The tiny VQ encoders: four stages of one resnet block each, 32 channels.
VQ = {"embed_dim": 8, "latent_channels": 32, "base_channels": 32, "channel_multiplier": [1, 1, 1, 1],
      "num_res_blocks": 1}

# -- Chameleon -----------------------------------------------------------------------

BOS, EOS, PAD, SEP = "<s>", "</s>", "<pad>", "<reserved08706>"
IMAGE, BOI, EOI = "<image>", "<racm3:break>", "<eoss>"


def image_code(code: int) -> str:
    """Chameleon's token of ``code``: ``IMGIMG``, its digits as letters, ``Z``."""
    return "IMGIMG" + "".join(chr(ord("A") + int(digit)) for digit in str(code)) + "Z"


CHAMELEON_TOKENS = (PAD, BOS, EOS, IMAGE, BOI, EOI, SEP, *(image_code(code) for code in range(CODES)))
#: The shorter side's pixels after the resize, and the centre crop's side.
SIDE = 32


def build_chameleon(path: Path, **overrides: Any) -> Path:
    """Write a tiny Chameleon checkpoint. ``overrides``: ``vq_config`` (a dict),
    ``image_processor`` (fields of ChameleonImageProcessor), other fields of the config."""
    from tokenizers import processors
    from transformers import ChameleonConfig, ChameleonImageProcessor, ChameleonProcessor, GenerationConfig

    tok = tokenizer(CHAMELEON_TOKENS, vocab_size=512, bos_token=BOS, eos_token=EOS, pad_token=PAD, sep_token=SEP)
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, tok.bos_token_id)])
    images = {"size": {"shortest_edge": SIDE}, "crop_size": {"height": SIDE, "width": SIDE},
              **overrides.pop("image_processor", {})}
    crop = images["crop_size"]["height"]
    cell = 2 ** (len(VQ["channel_multiplier"]) - 1)
    processor = ChameleonProcessor(image_processor=ChameleonImageProcessor(**images), tokenizer=tok,
                                   image_seq_length=(crop // cell) ** 2)
    special = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    config = ChameleonConfig(
        **{**TINY_TEXT, "vocab_size": len(tok), **special},
        vq_config={**VQ, "num_embeddings": CODES, "resolution": crop, **overrides.pop("vq_config", {})},
        vocabulary_map=tok.get_vocab(),
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(**special))


def build_chameleon_swin(path: Path, **overrides: Any) -> Path:
    """`build_chameleon` with the norms reordered (``swin_norm``)."""
    return build_chameleon(path, **{"swin_norm": True, **overrides})


# -- Emu3 ----------------------------------------------------------------------------

EMU3_BOS, EMU3_EOS, EMU3_PAD = "<|extra_203|>", "<|extra_204|>", "<|endoftext|>"
EOL, EOF = "<|extra_200|>", "<|extra_201|>"
IMAGE_START, IMAGE_END, IMAGE_WRAPPER = "<|image start|>", "<|image end|>", "<|image token|>"
VISUAL = tuple(f"<|visual token{code:06d}|>" for code in range(CODES))
EMU3_TOKENS = (EMU3_PAD, EMU3_BOS, EMU3_EOS, IMAGE, IMAGE_START, IMAGE_END, IMAGE_WRAPPER, EOL, EOF, *VISUAL)
#: The roles Emu3Processor reads off the tokenizer.
EMU3_ROLES = {"bos_token": EMU3_BOS, "eos_token": EMU3_EOS, "pad_token": EMU3_PAD, "image_token": IMAGE,
              "boi_token": IMAGE_START, "eoi_token": IMAGE_END, "image_wrapper_token": IMAGE_WRAPPER,
              "eof_token": EOF}
#: Emu3-Chat's chat template, as transformers' conversion script writes it.
EMU3_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}{% endif %}"
    "{# Render all images first #}{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}{# Render all text next #}{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' '}}"
    "{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
#: Pixels an image may have after Emu3's resize.
MIN_PIXELS, MAX_PIXELS = 16 * 16, 64 * 64


def build_emu3(path: Path, **overrides: Any) -> Path:
    """Write a tiny Emu3 checkpoint. ``overrides``: ``text_config`` and ``vq_config``
    dicts, ``image_processor`` (fields of Emu3ImageProcessor), other fields of the config."""
    from transformers import Emu3Config, Emu3ImageProcessor, Emu3Processor, GenerationConfig

    tok = tokenizer(EMU3_TOKENS, vocab_size=512, **EMU3_ROLES)
    images = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS, **overrides.pop("image_processor", {})}
    processor = Emu3Processor(image_processor=Emu3ImageProcessor(**images), tokenizer=tok,
                              chat_template=EMU3_CHAT_TEMPLATE)
    special = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    vq = {**VQ, "codebook_size": CODES, "attn_resolutions": [], "hidden_size": 32, "num_attention_heads": 1}
    config = Emu3Config(
        text_config={**TINY_TEXT, "vocab_size": len(tok), **special, **overrides.pop("text_config", {})},
        vq_config={**vq, **overrides.pop("vq_config", {})},
        vocabulary_map=tok.get_vocab(),
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(**special))


BUILDERS = {"chameleon": build_chameleon, "chameleon_swin": build_chameleon_swin, "emu3": build_emu3}
