"""A tiny T5Gemma 2 checkpoint for tests: random weights, the real processor.

What a T5Gemma 2 checkpoint holds, small: a byte-level tokenizer with Gemma 3's special
tokens (``<pad>``, ``<eos>``, ``<bos>`` first, as their ids 0, 1 and 2 are on the published
vocabulary; the turn markers; ``<start_of_image>``, ``<end_of_image>`` and the image soft
token), transformers' processor for the type (``Gemma3Processor`` over
``Gemma3ImageProcessor``, which writes an image as its begin marker, its soft tokens and
its end marker) and a chat template in Gemma 3's turn format.

The encoder and the decoder are 64 wide, two blocks each (a sliding-window block of 8
tokens, then a global one), 4 query heads over 2 key/value heads of 16, scores scaled by
``query_pre_attn_scalar ** -0.5`` with a scalar that is not the head width. SigLIP sees 56 x
56 pixels as 4 x 4 patches of 14, pooled 2 x 2 by the projector: 4 tokens an image. The
decoder starts at ``<bos>`` (the published ``decoder.bos_token_id``, which transformers'
generate starts the decoder with).

The final softcap is 1.0, a cap the tiny model's logits reach (``tanh(z / cap) * cap``
then differs from ``z`` past float error; a trained model's logits reach 30). Where
transformers initialises a weight to zero that would hide what the tests check (the
projection into the text width, the end-of-image embedding the encoder and decoder write
at ``<end_of_image>``), it is drawn at random.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vlreg.testing import CORPUS, TINY_TEXT, TINY_VISION, tokenizer

PAD, EOS, BOS = "<pad>", "<eos>", "<bos>"
BOI, EOI, IMAGE = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
TOKENS = (PAD, EOS, BOS, "<start_of_turn>", "<end_of_turn>", BOI, EOI, IMAGE)
SIDE, PATCH, TOKENS_PER_IMAGE = 56, 14, 4

TEXT = {
    **TINY_TEXT,
    "head_dim": 16,
    "query_pre_attn_scalar": 32,
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 8,
}
SIGLIP = {**TINY_VISION, "num_attention_heads": 4, "image_size": SIDE, "patch_size": PATCH, "vision_use_head": False}

#: Gemma 3's turns (``<start_of_turn>user``, ``<start_of_turn>model``), each image written
#: as its begin marker, which the processor expands into the image's soft tokens.
TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<start_of_image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}"
    "{% endfor %}{% endif %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build(path: Path, **overrides: Any) -> Path:
    """Write the tiny T5Gemma 2 checkpoint to ``path`` (see the module). ``overrides``:
    ``text_config`` (both stacks'), ``vision_config`` dicts, other fields of the top-level config."""
    import torch
    from transformers import (Gemma3ImageProcessor, Gemma3Processor, GenerationConfig, T5Gemma2Config,
                              T5Gemma2ForConditionalGeneration)

    path = Path(path)
    tok = tokenizer(TOKENS, (*CORPUS, "user model user model"), bos_token=BOS, eos_token=EOS, pad_token=PAD,
                    boi_token=BOI, eoi_token=EOI, image_token=IMAGE)
    processor = Gemma3Processor(image_processor=Gemma3ImageProcessor(size={"height": SIDE, "width": SIDE}),
                                tokenizer=tok, chat_template=TEMPLATE, image_seq_length=TOKENS_PER_IMAGE)
    ids = dict(zip(TOKENS, tok.convert_tokens_to_ids(list(TOKENS))))
    special = {"pad_token_id": ids[PAD], "eos_token_id": ids["<end_of_turn>"], "bos_token_id": ids[BOS]}
    text = {**TEXT, "vocab_size": len(tok), **special, **overrides.pop("text_config", {})}
    encoder = {"text_config": text, "vision_config": {**SIGLIP, **overrides.pop("vision_config", {})},
               "mm_tokens_per_image": TOKENS_PER_IMAGE, "boi_token_index": ids[BOI], "eoi_token_index": ids[EOI]}
    config = T5Gemma2Config(encoder=encoder, decoder={**text, "final_logit_softcapping": 1.0},
                            image_token_index=ids[IMAGE], **overrides)
    torch.manual_seed(0)
    model = T5Gemma2ForConditionalGeneration(config).eval()
    with torch.no_grad():  # zero at init (see the module)
        model.model.encoder.multi_modal_projector.mm_input_projection_weight.normal_(std=0.1)
        model.model.encoder.text_model.embed_tokens.eoi_embedding.normal_()
    model.save_pretrained(path)
    processor.save_pretrained(path)
    GenerationConfig(**special, decoder_start_token_id=ids[BOS]).save_pretrained(path)
    return path


BUILDERS = {"t5gemma2": build}
