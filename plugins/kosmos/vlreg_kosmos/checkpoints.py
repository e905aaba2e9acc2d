"""A tiny Kosmos-2 checkpoint for tests: random weights, through the real ``Kosmos2Processor``.

The processor writes each prompt's start itself: ``<s><image>``, then ``num_image_tokens``
consecutive ordinary ids (``unk_token_id + 1`` onward), then ``</image>``, and marks those ids
with its output ``image_embeds_position_mask``. ``num_image_tokens`` is a class attribute (64),
not saved with the processor, so the tiny model keeps the published 64 latent queries.
The processor adds its tag tokens and 1024 ``<patch_index_XXXX>`` tokens to the tokenizer.

Kosmos-2's published checkpoint ships no chat template; the one here writes the user's text
alone (the processor puts the image's tokens before it), on the tokenizer: ``Kosmos2Processor``
takes no ``chat_template`` and would drop its own on reload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing.checkpoints import save, tokenizer

CHAT_TEMPLATE = ("{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}"
                 "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
                 "{% endif %}{% endfor %}{% endif %}{% endfor %}")
#: 28-pixel images of 14-pixel patches: 2 x 2 patches and a class token.
SIDE, PATCH = 28, 14


def build_kosmos2(path: Path, **overrides: Any) -> Path:
    """Write a random-weight Kosmos2ForConditionalGeneration checkpoint to ``path``: a text model
    64 wide, 2 blocks, 4 heads, embeddings scaled by sqrt(64) as published; a CLIP-like tower 32
    wide, 2 blocks; 64 latent queries. ``overrides``: ``text_config`` and ``vision_config`` dicts,
    other fields of the top-level config."""
    from transformers import CLIPImageProcessor, GenerationConfig, Kosmos2Config, Kosmos2Processor

    overrides = dict(overrides)
    tok = tokenizer(["<s>", "<pad>", "</s>", "<unk>"], bos_token="<s>", pad_token="<pad>", eos_token="</s>",
                    unk_token="<unk>")
    images = CLIPImageProcessor(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
    tok.chat_template = CHAT_TEMPLATE  # the processor takes no template: the tokenizer's is used
    processor = Kosmos2Processor(image_processor=images, tokenizer=tok)
    ids = {role: tok.convert_tokens_to_ids(token) for role, token in
           (("bos_token_id", "<s>"), ("pad_token_id", "<pad>"), ("eos_token_id", "</s>"))}
    text = {"vocab_size": len(tok), "embed_dim": 64, "layers": 2, "ffn_dim": 128, "attention_heads": 4,
            "max_position_embeddings": 256, **ids, **overrides.pop("text_config", {})}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "image_size": SIDE, "patch_size": PATCH, **overrides.pop("vision_config", {})}
    config = Kosmos2Config(text_config=text, vision_config=vision, latent_query_num=processor.num_image_tokens,
                           **overrides)
    return save(Path(path), config, processor, GenerationConfig(**ids))


BUILDERS = {"kosmos-2": build_kosmos2}
