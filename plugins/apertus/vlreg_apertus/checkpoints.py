"""Apertus 1.5 checkpoints for tests: tiny random-weight ones, written as a hub checkpoint is.

`build_apertus1p5` writes the config, random weights, a tokenizer with the family's
special tokens in their roles (the processor reads the image's and audio's tokens off the
tokenizer), one ``<|visual tokenNNNNNN|>`` per code of the tiny visual codebook followed by
one ``<|audio tokenNNNNNN|>`` per audio code (the config's offsets are their first ids, and
the visual range must end where the audio range begins, as the config checks), the real
``Apertus1p5Processor`` with ``Apertus1p5ImageProcessor`` and the WavTokenizer feature
extractor, and a chat template in Apertus' turn tokens (``<|user_start|>`` ...
``<|user_end|>``, ``<|assistant_start|>``) writing ``<|image|>`` where an image goes.

The vision tokenizer's encoder is as small as its convolutions allow (GroupNorm of 32
groups: 32 channels) with four stages, so a code is 8 x 8 pixels; images are kept between
16 x 16 and 64 x 64 pixels (a 112 x 84 image is resized to 72 x 48: 9 x 6 codes, 54 image
tokens). The text model takes `vlreg.testing.TINY_TEXT`'s widths; the WavTokenizer
encoder is its smallest (audio is refused, but the model builds one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import TINY_TEXT, save, tokenizer

#: Codes in the tiny visual and audio codebooks (the published ones: 131072 and 4096).
CODES, AUDIO_CODES = 64, 16
BOS, EOS, PAD = "<s>", "</s>", "<pad>"
TURNS = ("<|system_start|>", "<|system_end|>", "<|user_start|>", "<|user_end|>", "<|assistant_start|>",
         "<|assistant_end|>")
IMAGE, AUDIO = "<|image|>", "<|audio|>"
IMAGE_START, IMAGE_END, IMAGE_WRAPPER, EOL = "<|image start|>", "<|image end|>", "<|image token|>", "<|extra_200|>"
AUDIO_START, AUDIO_END = "<|audio start|>", "<|audio end|>"
VISUAL = tuple(f"<|visual token{code:06d}|>" for code in range(CODES))
AUDIBLE = tuple(f"<|audio token{code:06d}|>" for code in range(AUDIO_CODES))
#: The roles Apertus1p5Processor reads off the tokenizer.
ROLES = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "image_token": IMAGE, "audio_token": AUDIO,
         "boi_token": IMAGE_START, "eoi_token": IMAGE_END, "image_wrapper_token": IMAGE_WRAPPER, "eol_token": EOL,
         "boa_token": AUDIO_START, "eoa_token": AUDIO_END}
TOKENS = (PAD, BOS, EOS, *TURNS, IMAGE, AUDIO, IMAGE_START, IMAGE_END, IMAGE_WRAPPER, EOL, AUDIO_START, AUDIO_END,
          *VISUAL, *AUDIBLE)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% set role = message['role'] %}{{ '<|' + role + '_start|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<|image|>' }}{% elif content['type'] == 'audio' %}{{ '<|audio|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<|' + role + '_end|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant_start|>' }}{% endif %}"
)
#: The tiny vision tokenizer: four stages of one resnet block each, 32 channels, no attention.
VISION = {"codebook_size": CODES, "embed_dim": 8, "latent_channels": 32, "base_channels": 32,
          "channel_multiplier": [1, 1, 1, 1], "num_res_blocks": 1, "attn_resolutions": [], "resolution": 32}
#: The smallest WavTokenizer encoder the model builds.
AUDIO_TOKENIZER = {"model_type": "wavtokenizer_encoder", "codebook_size": AUDIO_CODES, "codebook_dim": 8,
                   "hidden_size": 8, "num_filters": 4, "num_lstm_layers": 1}
#: Pixels an image may have after the resize.
MIN_PIXELS, MAX_PIXELS = 16 * 16, 64 * 64


def build_apertus1p5(path: Path, **overrides: Any) -> Path:
    """Write a tiny Apertus 1.5 checkpoint. ``overrides``: ``text_config`` and ``vision_config``
    dicts, ``image_processor`` (fields of Apertus1p5ImageProcessor), other fields of the config."""
    from transformers import (Apertus1p5Config, Apertus1p5ImageProcessor, Apertus1p5Processor, GenerationConfig,
                              WavTokenizerFeatureExtractor)

    tok = tokenizer(TOKENS, vocab_size=600, **ROLES)
    vision = {**VISION, **overrides.pop("vision_config", {})}
    images = {"size": {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS},
              "spatial_factor": 2 ** (len(vision["channel_multiplier"]) - 1), **overrides.pop("image_processor", {})}
    processor = Apertus1p5Processor(image_processor=Apertus1p5ImageProcessor(**images),
                                    feature_extractor=WavTokenizerFeatureExtractor(), tokenizer=tok,
                                    chat_template=CHAT_TEMPLATE)
    special = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    first = tok.convert_tokens_to_ids(VISUAL[0])
    config = Apertus1p5Config(
        # Apertus' rope is Llama 3's, scaled from 8192 positions: the tiny model keeps the published reach
        text_config={**TINY_TEXT, "max_position_embeddings": 65536, "vocab_size": len(tok), **special,
                     **overrides.pop("text_config", {})},
        vision_config=vision,
        audio_config=AUDIO_TOKENIZER,
        image_token_id=tok.convert_tokens_to_ids(IMAGE),
        audio_token_id=tok.convert_tokens_to_ids(AUDIO),
        image_token_offset=first,
        audio_token_offset=first + vision["codebook_size"],
        **overrides,
    )
    return save(path, config, processor, GenerationConfig(**special))


BUILDERS = {"apertus1p5": build_apertus1p5}
